#!/bin/bash
# A 4-host TPU job that resumes from its checkpoint when its spot slice is preempted.
#FRAY --backend tpu --tpu v4-32 --zone us-central2-b,us-east1-d
#FRAY --runtime-version tpu-ubuntu2204-base --spot
step=0
[ -f "$FRAY_CHECKPOINT_DIR/step" ] && step=$(cat "$FRAY_CHECKPOINT_DIR/step")
echo "host $FRAY_TASK_INDEX of $FRAY_NUM_TASKS starts at step $step (coordinator $JAX_COORDINATOR_ADDRESS)"
while [ "$step" -lt 20 ]; do
  sleep 1; step=$((step + 1))  # one training step
  if [ "$FRAY_TASK_INDEX" = 0 ]; then  # host 0 checkpoints, atomically, in the folder every attempt shares
    echo "$step" > "$FRAY_CHECKPOINT_DIR/step.tmp" && mv "$FRAY_CHECKPOINT_DIR/step.tmp" "$FRAY_CHECKPOINT_DIR/step"
  fi
done
echo "host $FRAY_TASK_INDEX done at step $step"
