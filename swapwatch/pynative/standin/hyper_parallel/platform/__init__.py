"""``hyper_parallel.platform`` stand-in: MindFormers' PyNative modules keep ``get_platform()`` at import
time and call it only on multi-rank paths (MoE routing groups, Muon), which a one-rank DryRun never takes."""
from hyper_parallel import Stub


def get_platform():
    return Stub()
