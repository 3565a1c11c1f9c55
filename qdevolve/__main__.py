"""``python -m qdevolve`` runs the command line."""

from qdevolve.cli import main

if __name__ == "__main__":
    main()
