"""Writes data/train.bin, the training data, as nanoGPT's data/*/prepare.py does (a .gitignore leaves it out of git)."""
import os

os.makedirs(os.path.join(os.path.dirname(os.path.abspath(__file__)), "data"), exist_ok=True)
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "train.bin"), "wb") as handle:
    handle.write(bytes(range(256)) * 64)
