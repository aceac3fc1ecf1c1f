import stash_core as stash, traceback, warnings
try:
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r=stash.profile(model="resnet10", batch_size=8, input_shape=(3,32,32), workers=2, max_phase_seconds=3, launches=1, progress="none", db="/tmp/rev_api/newdir2/sub/p.duckdb")
        print("RESULT", r); print("save_problem", r.save_problem); print("warnings", [str(x.message)[:300] for x in w])
except BaseException as e:
    tb=traceback.extract_tb(e.__traceback__)
    print("EXC", type(e).__name__, str(e)[:500], "notes", getattr(e,"__notes__",None), len(tb))
