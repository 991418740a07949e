import os
import sys

# The helper modules (reference packer, producers, NVRTC oracle) live next to the tests.
sys.path.insert(0, os.path.dirname(__file__))
