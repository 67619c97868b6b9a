"""This FRAY_HOME's own name, for marking what it creates outside itself (TPU slices' `fray-home` label).

Two homes may share a cloud project (two users, or one user on two login
machines with the same home path), and each deletes the fray slices it finds
no live run for. A label naming the home keeps each to its own. The name is
random, not derived from the path: the same path on two machines is two homes.
Written once (link, never replace), so racing daemons and commands agree on it.
"""

from __future__ import annotations

import secrets

from fray.state.layout import Home
from fray.wrapper import face as wrapper

ID_BYTES = 8  # 16 hex characters: a valid label value, and no two homes alike


def home_id(home: Home) -> str:
    """This home's id, created on first use; raises OSError when the home cannot be written or read."""
    path = home.home_id
    try:
        return _valid(path.read_text())
    except FileNotFoundError:
        pass
    except ValueError:
        # A damaged id would orphan every slice it labelled; say so rather than mint a new one.
        raise OSError(f"{path} is damaged (expected {2 * ID_BYTES} hex characters); restore it, or delete it "
                      "and then delete this home's fray-labelled TPU slices by hand") from None
    wrapper.create_bytes(path, (secrets.token_hex(ID_BYTES) + "\n").encode())  # a racing writer may win
    return _valid(path.read_text())


def _valid(text: str) -> str:
    value = text.strip()
    if len(value) != 2 * ID_BYTES or any(c not in "0123456789abcdef" for c in value):
        raise ValueError(value)
    return value
