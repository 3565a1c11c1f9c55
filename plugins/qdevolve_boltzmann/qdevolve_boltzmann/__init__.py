"""Boltzmann parent selection for qdevolve, packaged as a third-party plugin."""

from qdevolve_boltzmann.selection import BoltzmannSelection

__all__ = ["BoltzmannSelection"]
