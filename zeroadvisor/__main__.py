from zeroadvisor.cli.app import main

main()
