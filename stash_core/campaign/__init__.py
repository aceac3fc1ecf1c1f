"""Campaigns: sweeps of profiles, planned (plan.py), run here or over SSH (local.py), or on instance types
rented through SkyPilot, priced first (cloud_plan.py, cloud.py)."""
