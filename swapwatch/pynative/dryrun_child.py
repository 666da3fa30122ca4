"""Run one r2.x training YAML through MindSpore's PyNative DryRun (``MS_SIMULATION_LEVEL=1``): the child
process of :func:`swapwatch.pynative.dryrun.measure` (docs/estimate.md, "The PyNative path").

Standalone on purpose: it runs under the interpreter that has MindSpore and MindFormers with numpy 1
(``.pynative-venv``, ``make dryrun-pynative``; PyNative breaks under numpy 2), started by file path. It
does what MindFormers' PyNative ``Trainer(config).train()`` does for one simulated rank, with only what a
one-rank simulation on a CPU host needs:

* PyNative mode on the Ascend target (the CANN stand-ins of ``make dryrun`` or a real toolkit);
* ``hyper_parallel`` from the interpreter, else the project's stand-in (``standin/``, what it simulates
  faithfully is in its README: recompute and swap yes, ``exclude_op`` no);
* ``apply_ac`` called by hand right after the model is built, with the arguments
  ``parallelize.py:_apply_spmd_parallelism`` passes (a one-rank Trainer skips ``parallelize_model``);
* parameters materialised on the device (``to_empty(device="Ascend")``: without a device they stay on
  ``meta``), their initialisers left unrun (DryRun never reads values);
* random token ids of the YAML's sequence length instead of its data loader, two optimizer steps (the
  second is the steady state: AdamW's states exist from its start), no checkpoint, a constant learning
  rate with one warm-up step.

usage: MS_SIMULATION_LEVEL=1 RANK_SIZE=1 RANK_ID=0 python dryrun_child.py CONFIG.yaml
MindSpore prints the peaks at exit (WARNING level):
  Used peak memory usage (without fragments): NNNM
  Actual peak memory usage (with fragments): NNNM
The child adds ``[dryrun-pynative] ...`` lines: which hyper_parallel ran, what swap did.
"""
import importlib.util
import os
import sys
import time

import yaml

STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "standin")
TAG = "[dryrun-pynative]"
#: optimizer steps run: the second is the first with the optimizer's states alive in forward and backward
STEPS = 2


def _say(msg):
    print(f"{TAG} {msg}", flush=True)


def _hyper_parallel():
    """The interpreter's own hyper_parallel, else the stand-in (which one is printed)."""
    if importlib.util.find_spec("hyper_parallel") is not None:
        _say("hyper_parallel: installed")
        return "installed"
    sys.path.insert(0, STANDIN)
    _say(f"hyper_parallel: stand-in ({STANDIN})")
    return "standin"


def _seq_length(data):
    model = data.get("model") or {}
    seq = model.get("seq_length")
    if seq is None:
        seq = (((data.get("train_dataset") or {}).get("dataloader") or {}).get("config") or {}).get("seq_length")
    if not isinstance(seq, int) or seq <= 0:
        raise SystemExit(f"{TAG} model.seq_length (or train_dataset.dataloader.config.seq_length) is needed")
    return seq


def trainer_config(data):
    """The YAML's sections, with two steps (the first builds AdamW's states and fp32 master copies as
    it updates each parameter, so only from the second step on does the forward and backward run
    beside them: the peak of a training run is the larger of the two steps), no checkpoint, no monitor,
    a constant warm-up LR."""
    cfg = dict(data)
    training = dict(cfg.get("training") or {})
    training.update(steps=STEPS)
    cfg["training"] = training
    cfg["checkpoint"] = {**(cfg.get("checkpoint") or {}), "enable_save": False, "load_path": "",
                         "base_load_path": ""}
    cfg["lr_scheduler"] = {"type": "ConstantWarmUpLR", "learning_rate": 1.0e-5, "warmup_steps": 1}
    # the dataset is handed to the Trainer (random_dataset); its config section is only type-checked
    cfg["train_dataset"] = {"dataloader": {"type": "HFDataLoader"}, "num_parallel_workers": 1}
    cfg.pop("monitor", None)
    cfg.pop("profiler", None)
    cfg["callbacks"] = []
    return cfg


def random_dataset(seq, vocab, batch):
    """Token ids and labels of the YAML's shape (what the loader would give, values aside)."""
    import numpy as np
    from mindspore.dataset import GeneratorDataset

    rng = np.random.default_rng(0)

    def rows():
        for _ in range(batch * 4):
            ids = rng.integers(0, vocab, size=(seq,), dtype=np.int32)
            yield ids, np.roll(ids, -1)
    ds = GeneratorDataset(rows, column_names=["input_ids", "labels"], shuffle=False)
    return ds.batch(batch, drop_remainder=True)


def patch_trainer():
    """``apply_ac`` after the model is built (as ``parallelize.py:_apply_spmd_parallelism`` Phase 4
    would call it: the decoder, the three sections, ``parallelism.pipeline_parallel``, the MTP block),
    and parameters materialised on the simulated device."""
    from mindspore import nn
    from mindformers.pynative.trainer import trainer as tr
    from mindformers.pynative.distributed.activation_checkpoint import apply_ac

    create = tr.Trainer._create_model

    def create_model(self, model, model_config):
        model = create(self, model, model_config)
        cfg = self.config
        if cfg.recompute.mode != "None" or cfg.recompute_comm.enable or cfg.swap.enable:
            gpt = model
            for attr in ("model", "gpt_model"):
                if not hasattr(gpt, "decoder") and hasattr(gpt, attr):
                    gpt = getattr(gpt, attr)
            apply_ac(gpt.decoder, cfg.recompute, cfg.recompute_comm, cfg.swap, cfg.parallelism.pipeline_parallel,
                     mtp_block=getattr(gpt, "mtp", None))
            _say("apply_ac: called")
        return model
    tr.Trainer._create_model = create_model

    to_empty = nn.Cell.to_empty

    def to_ascend(self, *, device=None, **kwargs):
        return to_empty(self, device=device or "Ascend", **kwargs)
    nn.Cell.to_empty = to_ascend

    from mindspore.common import initializer as msinit
    msinit.Initializer.__call__ = lambda self, arr: None


def main(argv):
    config = os.path.abspath(argv[1])
    t0 = time.time()
    with open(config, encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    import mindspore as ms

    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_device("Ascend")
    which = _hyper_parallel()
    patch_trainer()
    from mindformers.pynative.trainer import Trainer

    model = data.get("model") or {}
    batch = int((data.get("training") or {}).get("local_batch_size", 1))
    ds = random_dataset(_seq_length(data), int(model.get("vocab_size", 32000)), batch)
    trainer = Trainer(config=trainer_config(data), train_dataset=ds)
    trainer.train()
    if which == "standin":
        from hyper_parallel.core.activation_checkpoint.swap import SWAPS
        _say("swap: " + (", ".join(f"{k} {v}" for k, v in sorted(SWAPS.items())) or "nothing swapped"))
    _say(f"train() returned after {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
