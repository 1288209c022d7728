"""The command line: a thin typer layer that parses flags, calls the library, maps results to exit codes."""


def main() -> None:
    """Console-script entry point (imports typer only when the command line runs)."""
    from zeroadvisor.cli.app import main as run

    run()
