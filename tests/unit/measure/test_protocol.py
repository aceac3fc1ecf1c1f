import io
import math

from stash_core.measure import protocol


def test_round_trip_with_a_launcher_prefix_and_non_finite_numbers():
    stream = io.StringIO()
    protocol.emit("PROGRESS", {"mean_s": 0.5, "ci": math.inf, "xs": [math.nan, 1.0]}, stream)
    line = "[rank0]: " + stream.getvalue().strip()
    kind, payload = protocol.parse(line)
    assert kind == "PROGRESS"
    assert payload == {"mean_s": 0.5, "ci": None, "xs": [None, 1.0]}


def test_ordinary_and_malformed_lines_are_ignored():
    assert protocol.parse("epoch 3 done") is None
    assert protocol.parse("STASH-RESULT {not json") is None
    assert protocol.parse("STASH-UNKNOWN {}") is None
