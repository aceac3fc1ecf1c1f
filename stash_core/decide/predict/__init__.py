"""Predicted training-step times for instances never profiled: FLOPs, bytes and kernels of the step
(step_cost), the step model (roofline: per operator class, launch and dispatch costs, wave effects) fitted
to published throughputs (calibration, published) and validated held out by source and by GPU
(validation, stated_error: the error a prediction prints), a memory check (memory) and the all-reduce
model (network); configuration.py puts them together per instance, anchored on stored GPU profiles where
there are some, and instances.py for a whole catalog."""

from stash_core.decide.predict.configuration import ConfigPrediction, Predictor
from stash_core.decide.predict.instances import Prediction, predict_instances

__all__ = ["ConfigPrediction", "Prediction", "Predictor", "predict_instances"]
