from ragpulse.cli import main

main()
