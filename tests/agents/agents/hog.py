"""Allocates memory until something stops it."""


def propose(task, parent, feedback, tools):
    hoard = []
    while True:
        hoard.append(b"\x01" * (32 << 20))
