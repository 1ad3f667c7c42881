from nsyswrap.cli import main

main()
