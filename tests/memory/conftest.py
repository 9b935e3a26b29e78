import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from memory_fixtures import *  # noqa: E402,F401,F403
from recall_fixtures import *  # noqa: E402,F401,F403
