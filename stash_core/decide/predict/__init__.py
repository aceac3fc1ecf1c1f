"""Predicted training-step times for instances never profiled: FLOPs and bytes of the step (step_cost), an
accelerator table with sources (accelerators.csv), a per-operator roofline (roofline) with efficiencies
calibrated on published throughputs and stored GPU profiles (calibration, validation), a memory check
(memory) and the all-reduce model (network); configuration.py puts them together per instance, and
instances.py for a whole catalog."""

from stash_core.decide.predict.configuration import ConfigPrediction, Predictor
from stash_core.decide.predict.instances import Prediction, predict_instances

__all__ = ["ConfigPrediction", "Prediction", "Predictor", "predict_instances"]
