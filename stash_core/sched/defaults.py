"""The defaults of a simulation, one definition for `stash schedule` and the Schedule page (no pandas here:
the command's parser reads them)."""

from __future__ import annotations

from stash_core.sched.fabric import REFERENCE_GBPS
from stash_core.sched.policy import POLICIES

CLUSTER = (2, 4, 8)  # switches, nodes per switch, GPUs per node
SYNTHETIC_JOBS = 300  # the page's synthetic trace (the command asks for a number)
MEAN_GAP_S = 120.0  # mean time between synthetic arrivals
ARRIVAL_KINDS = ("poisson", "batch", "burst")  # generate.py
ARRIVALS = "poisson"
GENERATOR = "basic"  # or "philly" (generate.py)
TRACE_FORMAT = "auto"  # told from the file's columns (detect.py)
SEED = 0
TUNING = "split"  # when no timer is given
TUNE_FRACTION = 0.3
DELAY_S = 600.0  # delay's timer when given
SCALE = 1.0  # network timers' scale when given
CHECKPOINT_S = 30.0
MIN_RUN_S = 600.0
MAX_PREEMPTIONS = 3
LAS_LIMITS_GPU_H = (1.0, 10.0)
STARVE_FACTOR = 10.0
UPLINK_FACTOR = 2.0  # without a fabric: the network stall multiplier across switches
NODE_GBPS = None  # no fabric unless given
OVERSUBSCRIPTION = 1.0
REFERENCE = REFERENCE_GBPS
POLICY_NAMES = POLICIES
MODELS = ("resnet50", "resnet18", "alexnet", "shufflenet_v2", "vgg16", "bert_base")  # the basic generator's
