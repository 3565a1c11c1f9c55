"""Allocates (and touches) memory in 16 MiB steps until refused; returns the MiB it held."""


def propose(task, parent, feedback, tools):
    hoard = []
    try:
        while len(hoard) < 256:
            hoard.append(b"\x01" * (16 << 20))
    except MemoryError:
        pass
    held = len(hoard) * 16
    hoard.clear()
    return str(held)
