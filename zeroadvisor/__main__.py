from zeroadvisor.cli import main

main()
