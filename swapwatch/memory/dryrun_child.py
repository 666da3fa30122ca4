"""Run one training YAML through MindSpore DryRun (``MS_SIMULATION_LEVEL=1``): the child process of
:func:`swapwatch.memory.dryrun.measure`.

Standalone on purpose: it runs under the interpreter that has MindSpore and MindFormers (on this
project's machines ``.oracle-venv``, which does not have swapwatch), started by file path. It does
what MindFormers' ``run_mindformer.py`` does (``MindFormerConfig`` -> ``build_context`` ->
``Trainer(config).train()``) with only the overrides a CPU host needs and that do not change device
memory (docs/estimate.md, "DryRun L1"): MindFormers' own mock data source, one step, no checkpoint
saving, no profiling, runtime dispatch threads, output under the working directory.

usage: MS_SIMULATION_LEVEL=1 RANK_SIZE=N RANK_ID=R python dryrun_child.py CONFIG.yaml
MindSpore prints the peaks at exit (WARNING level):
  Used peak memory usage (without fragments): NNNM
  Actual peak memory usage (with fragments): NNNM
"""
import os
import sys
import time

os.environ.setdefault("LOG_MF_PATH", "./mf_log")


def numpy2_workaround():
    """MindSpore 2.10 (built against numpy 1) cannot run the few eager ops of the training path under
    numpy 2, which MindFormers 2.1.0's dependencies need. DryRun computes no values: rebuild such
    Python-built constants with the right shape (GenerationMixin.__init__'s ``Tensor([0],
    bfloat16).reshape(1, 1)``), and give bfloat16 constants sliced or cast at compile time zeros of the
    right shape (comm_ops._GetTensorSlice.infer_value, ops_def.infer_value_for_Cast)."""
    import numpy as np
    import mindspore as ms
    from mindspore import Tensor
    orig_init, orig_reshape = Tensor.__init__, Tensor.reshape

    def init(self, input_data=None, *args, **kwargs):
        orig_init(self, input_data, *args, **kwargs)
        if type(self) is Tensor and isinstance(input_data, (list, tuple, int, float, bool)):
            self._py_src = input_data

    def reshape(self, *shape):
        src = getattr(self, "_py_src", None)
        if src is None:
            return orig_reshape(self, *shape)
        shp = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return Tensor(np.array(src).reshape(shp).tolist(), dtype=self.dtype)
    Tensor.__init__, Tensor.reshape = init, reshape

    from mindspore.ops.operations import comm_ops
    orig_infer_value = comm_ops._GetTensorSlice.infer_value  # pylint: disable=protected-access

    def infer_value(self, x, dev_mat, tensor_map, slice_shape, full_shape):
        if x is not None and x.dtype == ms.bfloat16:
            return Tensor(np.zeros(tuple(slice_shape), np.float32), ms.bfloat16)
        return orig_infer_value(self, x, dev_mat, tensor_map, slice_shape, full_shape)
    comm_ops._GetTensorSlice.infer_value = infer_value  # pylint: disable=protected-access

    from mindspore._c_expression import typing
    from mindspore.ops.operations.manually_defined import ops_def
    orig_cast = ops_def.infer_value_for_Cast

    def infer_value_for_cast(x, dst_type_enum=None):
        try:
            return orig_cast(x, dst_type_enum)
        except TypeError as err:
            if "bfloat16" not in str(err):
                raise
        dst = typing.type_id_to_type(dst_type_enum)
        if isinstance(x, (int, float)):
            arr = np.array(x, np.float32)
        elif x.dtype == ms.bfloat16:
            arr = np.zeros(tuple(x.shape), np.float32)
        else:
            arr = x.asnumpy().astype(np.float32)
        return Tensor(arr, dtype=dst)
    ops_def.infer_value_for_Cast = infer_value_for_cast


def legacy_mock_loader(cfg):
    """A legacy YAML (use_legacy absent or True: models/llama/llama.py) reads a MindDataset of
    seq_length + 1 tokens that LlamaForCausalLM.construct slices into tokens and labels. There is no
    data here: feed it MindFormers' own mock source instead (the BlendedMegatron loader with no
    data_path, MockBlendedMegatron), which gives input_ids and labels of seq_length each, and tell the
    model they come pre-sliced (model_config.input_sliced_sig, which base_trainer.py:
    _check_input_sliced_sig asks for with this loader on the legacy path). Device memory differs only
    by the int32 input columns (a few KiB to MiB): the same cells, the same activations."""
    mc = cfg.model.model_config
    loader = {"type": "BlendedMegatronDatasetDataLoader", "datasets_type": "GPTDataset", "sizes": [1, 0, 0],
              "config": {"seed": 1234, "split": "1, 0, 0", "seq_length": mc.seq_length,
                         "eod_mask_loss": False, "reset_position_ids": False, "create_attention_mask": False,
                         "reset_attention_mask": False, "create_compressed_eod_mask": False,
                         "eod_pad_length": 128, "eod": 1, "pad": -1}}
    from mindformers.tools.register import MindFormerConfig
    cfg.train_dataset.data_loader = MindFormerConfig(**loader)
    cfg.train_dataset.input_columns = ["input_ids", "labels", "loss_mask", "position_ids"]
    cfg.train_dataset.construct_args_key = ["input_ids", "labels"]
    task = cfg.get("train_dataset_task") or {}
    if task.get("dataset_config") is not None:
        task.dataset_config = cfg.train_dataset
    mc.input_sliced_sig = True


def main(argv):
    config = os.path.abspath(argv[1])
    t0 = time.time()
    import mindspore as ms
    numpy2_workaround()
    from mindformers.tools.register import MindFormerConfig
    from mindformers.core.context import build_context
    from mindformers.trainer import Trainer
    from mindformers.utils.file_utils import set_output_path

    cfg = MindFormerConfig(config)
    pc = cfg.parallel_config
    dl = cfg.train_dataset.data_loader
    if dl.get("type") == "MindDataset" and cfg.get("use_legacy", True) is not False:
        legacy_mock_loader(cfg)
        dl = cfg.train_dataset.data_loader
    if dl.get("type") != "BlendedMegatronDatasetDataLoader":
        raise SystemExit(f"[dryrun] {config}: train_dataset.data_loader.type {dl.get('type')!r}: only "
                         f"BlendedMegatronDatasetDataLoader (mcore) and legacy MindDataset YAMLs are run "
                         f"through DryRun here")
    # mock data: BlendedMegatronDatasetConfig sets mock=True when there is no data_path / blend
    dl.config.pop("data_path", None)
    dp, mbn = pc.get("data_parallel", 1), pc.get("micro_batch_num", 1)
    gbs = cfg.runner_config.batch_size * dp * (mbn if pc.get("pipeline_stage", 1) > 1 else 1) \
        * cfg.runner_config.get("gradient_accumulation_steps", 1) * (cfg.get("micro_batch_interleave_num") or 1)
    dl["sizes"] = [gbs, 0, 0]
    cfg.train_dataset.num_parallel_workers = 1
    cfg.runner_config.epochs = 1
    cfg.runner_config.sink_mode = True
    cfg.runner_config.sink_size = 1
    cfg.callbacks = [{"type": "MFLossMonitor"}]
    cfg.load_checkpoint = ""
    cfg.resume_training = False
    cfg.profile = False
    cfg.output_dir = "./output"
    asc = cfg.context.get("ascend_config") or {}
    sp = asc.get("parallel_speed_up_json_path")
    if sp and not os.path.exists(sp):
        asc.pop("parallel_speed_up_json_path")

    # The GPTDataset loader builds a real indexed dataset even without data_path; use the constant mock
    # source MindFormers itself feeds to ranks that hold no data (MockBlendedMegatron).
    from mindformers.dataset.dataloader import blended_megatron_dataloader as bmd

    def mock_dataset(self, sizes, column_names, shuffle=False, num_shards=None, shard_id=None, phase="train",
                     **kwargs):  # pylint: disable=unused-argument
        source = bmd.MockBlendedMegatron(self.init_gpt_dataset_config(), sizes[0])
        return bmd.GeneratorDataset(source, column_names=source.cols(), shuffle=False,
                                    num_shards=num_shards, shard_id=shard_id)
    bmd.MegatronDatasetBuilder.build_gptdataset_or_fakedataset = mock_dataset
    # the mock source needs none of the C++ index helpers MindFormers would otherwise compile into its
    # own installed package (blended_datasets/utils.py:compile_helpers)
    bmd.compile_helpers = lambda: None

    # DryRun never reads parameter values: leave the initialisers' host buffers unfilled (same device
    # peak; host RAM 0.9 GB instead of 4 bytes per fp32 parameter of the whole model)
    from mindspore.common import initializer as msinit
    msinit.Initializer.__call__ = lambda self, arr: None

    set_output_path(cfg.output_dir)
    # on a host with few cores MindSpore disables the kernel-by-kernel sub-graph executor, which the
    # training graph's control flow (ConditionSwitch) needs
    ms.runtime.dispatch_threads_num(8)
    build_context(cfg)
    Trainer(cfg).train()
    print(f"[dryrun] train() returned after {time.time() - t0:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
