import sys

from kubeloop._cli import main

sys.exit(main())
