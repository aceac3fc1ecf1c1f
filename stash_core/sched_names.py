"""The names a scheduler simulation is known by: its policies and the trace formats it reads. They sit below
the simulator (stash_core.sched) so that storing a simulation file can hold its names to them: a file's
policy "quantum" or trace format "slurm" was stored and shown as if the simulator had run it."""

POLICIES = ("fifo", "sjf", "las", "fifo-consolidate", "consolidate", "spread", "delay", "network-delay",
            "network-preempt")  # fmt: skip
TRACE_FORMATS = ("tiresias", "philly", "pai2020", "helios")  # the formats of trace files it reads
SYNTHETIC_TRACE = "synthetic"  # the trace format of a simulation of a generated trace
