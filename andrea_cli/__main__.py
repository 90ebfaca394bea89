from andrea_cli.cli import main

main()
