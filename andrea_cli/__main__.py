from andrea_cli.cli import app

app()
