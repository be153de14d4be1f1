"""Every scenario, registered in the order --list shows them (and ctest adds them)."""

from . import scenarios_rig  # noqa: F401  (each module registers its scenarios)
from . import scenarios_nccl_tests  # noqa: F401
from . import scenarios_python  # noqa: F401
from . import scenarios_ways_in  # noqa: F401
from . import scenarios_groups  # noqa: F401
from . import scenarios_creation  # noqa: F401
from . import scenarios_recovery  # noqa: F401
from . import scenarios_gpus  # noqa: F401
from . import scenarios_guest  # noqa: F401
from . import scenarios_newer_api  # noqa: F401
from . import scenarios_setup  # noqa: F401
from . import scenarios_pcie  # noqa: F401
from .scenario import SCENARIOS, select  # noqa: F401  (what users of this module want)
