"""ontrain.api, the ONNX-Runtime-shaped Python API: ONNX Runtime's sample loop on the tests/data/ort_mlp
artifacts (an MLP in ONNX Runtime's conventions) against the numpy float64 reference run of
tools/make_mlp_fixture.py (losses and parameters after 10 AdamW steps) and against ONNX Runtime's own
training losses (tests/data/ort_reference_losses.txt, onnxruntime-web 1.19.2) on that set and on ONNX
Runtime's artifact sets in ../shared/ort-artifacts (ONTRAIN_ORT_ARTIFACTS; skipped with the reason where
absent); checkpoints and properties, the parameter buffer, export, the schedulers, and the errors. Run by
pytest, one JUnit case per test.
"""
import math
import os
import sys

import numpy as np
import pytest

import ontrain_test_support

ontrain_test_support.reexec_with_asan_runtime()

from ontrain import api, artifacts  # noqa: E402 (after the re-exec)

ROOT = os.path.join(os.environ.get("TEST_SRCDIR", ""), os.environ.get("TEST_WORKSPACE", ""))
DATA = os.path.join(ROOT, "tests/data/ort_mlp")
TMP = os.environ.get("TEST_TMPDIR", "/tmp")


def path(name):
    return os.path.join(DATA, name)


def batch(step):
    """The same batches as the C++ and C tests (tests/ort_artifacts.cc: SyntheticFloats, SyntheticLabels)."""
    x = (np.sin(0.37 * np.arange(48) + 1.3 * step) * 0.8).astype(np.float32).reshape(8, 6)
    y = np.array([(7 * i + 3 * step) % 3 for i in range(8)], dtype=np.int64)
    return x, y


def reference():
    losses, params = [], {}
    with open(path("reference.txt")) as f:
        for line in f:
            parts = line.split()
            if parts and parts[0] == "loss":
                losses.append(float(parts[2]))
            elif parts and parts[0] == "param":
                params.setdefault(parts[1], []).append(float(parts[3]))
    return losses, params


def make():
    state = api.CheckpointState.load_checkpoint(path("checkpoint"))
    model = api.Module(path("training_model.onnx"), state, path("eval_model.onnx"))
    optimizer = api.Optimizer(path("optimizer_model.onnx"), model)
    return state, model, optimizer


def train(model, optimizer, steps):
    losses = []
    model.train()
    for step in range(steps):
        out = model(*batch(step))
        optimizer.step()
        model.lazy_reset_grad()
        losses.append(float(out[0]))
    return losses


def test_sample_loop_matches_numpy_reference():
    ref_losses, ref_params = reference()
    state, model, optimizer = make()
    assert model.input_names() == ["input", "labels"]
    assert model.output_names() == ["onnx::loss::2", "logits"]
    losses = train(model, optimizer, 10)
    for step, (got, want) in enumerate(zip(losses, ref_losses)):
        assert abs(got - want) <= 1e-5 * abs(want), f"step {step}: {got} vs numpy {want}"
    for name, values in ref_params.items():
        got = state.parameters[name].data.ravel()
        want = np.array(values)
        assert got.shape == want.shape
        rel = np.abs(got - want) / np.maximum(np.abs(want), 1e-2)
        assert rel.max() <= 1e-5, f"{name}: largest relative difference {rel.max()}"


# ONNX Runtime's artifact sets with plain synthetic batches (tools/ort_reference/sets.json; the C++
# tests/engine/ort_parity_test.cc trains the same): name -> inputs as (name, kind, shape, classes).
ORT_SETS = {
    "ort_mlp": [("input", "float", (8, 6), 0), ("labels", "int64", (8,), 3)],
    "ort-testdata-mlp": [("input-0", "float", (4, 784), 0), ("labels", "int32", (4,), 10)],
    "carzh-web-mnist": [("input", "float", (4, 784), 0), ("labels", "int64", (4,), 10)],
    "srij-lora": [("input", "float", (4, 10), 0), ("target", "target", (4, 2), 0)],
    "seizureguard-cnn1d": [("input", "float", (2, 18, 1024), 0), ("labels", "int64", (2,), 2)],
}


def synthetic(kind, shape, classes, step):
    n = int(np.prod(shape))
    i = np.arange(n)
    if kind == "float":
        return (np.sin(0.37 * i + 1.3 * step) * 0.8).astype(np.float32).reshape(shape)
    if kind == "target":
        return (np.cos(0.11 * i + 0.7 * step) * 0.5).astype(np.float32).reshape(shape)
    return ((7 * i + 3 * step) % classes).astype(np.int32 if kind == "int32" else np.int64).reshape(shape)


def ort_reference(name):
    losses, eval_loss = [], None
    with open(os.path.join(ROOT, "tests/data/ort_reference_losses.txt")) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[0] == name:
                if parts[1] == "eval":
                    eval_loss = float(parts[2])
                else:
                    losses.append(float(parts[2]))
    return losses, eval_loss


@pytest.mark.parametrize("name", sorted(ORT_SETS))
def test_losses_match_onnx_runtime(name):
    if name == "ort_mlp":
        folder = DATA
    else:
        root = os.environ.get("ONTRAIN_ORT_ARTIFACTS")
        if not root or not os.path.isdir(os.path.join(root, name)):
            pytest.skip(f"ONNX Runtime's artifact set {name} is not here (ONTRAIN_ORT_ARTIFACTS unset or "
                        "without it; tools/test.sh sets it from ../shared/ort-artifacts)")
        folder = os.path.join(root, name)
    losses, eval_loss = ort_reference(name)
    assert len(losses) == 20 and eval_loss is not None, f"no ONNX Runtime reference for {name}"
    state = api.CheckpointState.load_checkpoint(os.path.join(folder, "checkpoint"))
    model = api.Module(os.path.join(folder, "training_model.onnx"), state, os.path.join(folder, "eval_model.onnx"))
    optimizer = api.Optimizer(os.path.join(folder, "optimizer_model.onnx"), model)
    specs = ORT_SETS[name]
    assert model.input_names() == [s[0] for s in specs]
    worst = 0.0
    for step, want in enumerate(losses):
        out = model(*[synthetic(kind, shape, classes, step) for _, kind, shape, classes in specs])
        optimizer.step()
        model.lazy_reset_grad()
        got = float(np.asarray(out[0] if isinstance(out, list) else out).ravel()[0])
        rel = abs(got - want) / max(1e-12, abs(want))
        worst = max(worst, rel)
        assert rel <= 1e-5, f"{name} step {step}: ontrain {got}, ONNX Runtime {want}"
    model.eval()
    out = model(*[synthetic(kind, shape, classes, 20) for _, kind, shape, classes in specs])
    got = float(np.asarray(out[0] if isinstance(out, list) else out).ravel()[0])
    assert abs(got - eval_loss) <= 1e-5 * abs(eval_loss), f"{name} eval: ontrain {got}, ONNX Runtime {eval_loss}"
    print(f"[ort-parity python] {name}: 20 steps, largest relative loss difference {worst:.3g}")


def test_eval_mode_runs_the_eval_model_and_does_not_train():
    state, model, optimizer = make()
    before = state.parameters["fc1.weight"].data
    model.eval()
    assert not model.training
    out = model(*batch(0))
    names = model.output_names()
    assert len(out) == len(names) and len(names) >= 1
    loss = float(np.asarray(out[0]).ravel()[0])
    want = reference()[0][0]  # the loss of batch 0 at the initial parameters
    assert abs(loss - want) <= 1e-5 * abs(want), f"{names[0]}: {loss} vs numpy {want}"
    np.testing.assert_array_equal(state.parameters["fc1.weight"].data, before)


def test_resume_from_saved_checkpoint_reproduces_the_run_bit_for_bit():
    state, model, optimizer = make()
    full = train(model, optimizer, 6)
    state2, model2, optimizer2 = make()
    train(model2, optimizer2, 3)
    saved = os.path.join(TMP, "resume.ckpt")
    api.CheckpointState.save_checkpoint(state2, saved, include_optimizer_state=True)
    state3 = api.CheckpointState.load_checkpoint(saved)
    model3 = api.Module(path("training_model.onnx"), state3, path("eval_model.onnx"))
    optimizer3 = api.Optimizer(path("optimizer_model.onnx"), model3)
    rest = []
    for step in range(3, 6):
        out = model3(*batch(step))
        optimizer3.step()
        model3.lazy_reset_grad()
        rest.append(float(out[0]))
    assert rest == full[3:]


def test_properties_round_trip_through_a_checkpoint():
    state = api.CheckpointState.load_checkpoint(path("checkpoint"))
    state.properties["hours in a year"] = 8760
    state.properties["pi"] = 3.14
    state.properties["framework"] = "onnxruntime"
    saved = os.path.join(TMP, "props.ckpt")
    api.CheckpointState.save_checkpoint(state, saved)
    again = api.CheckpointState.load_checkpoint(saved)
    assert again.properties["hours in a year"] == 8760
    assert again.properties["pi"] == pytest.approx(3.14, rel=1e-7)  # stored as float32
    assert again.properties["framework"] == "onnxruntime"
    assert "pi" in again.properties and "nope" not in again.properties
    del again.properties["pi"]
    assert "pi" not in again.properties
    with pytest.raises(KeyError, match="nope"):
        again.properties["nope"]
    with pytest.raises(ValueError, match="bool"):
        again.properties["flag"] = True


def test_parameters_by_name_and_assignment():
    state = api.CheckpointState.load_checkpoint(path("checkpoint"))
    names = list(state.parameters)
    assert "fc1.weight" in names and len(state.parameters) == len(names)
    p = state.parameters["fc1.weight"]
    assert p.requires_grad
    w = p.data
    state.parameters["fc1.weight"] = np.full_like(w, 0.25)
    assert np.all(state.parameters["fc1.weight"].data == 0.25)
    with pytest.raises(ValueError, match="fc1.weight"):
        state.parameters["fc1.weight"] = np.zeros((1, 1), dtype=np.float32)
    with pytest.raises(KeyError, match="nope"):
        state.parameters["nope"]


def test_gradients_match_finite_differences_and_accumulate():
    state, model, _ = make()
    with pytest.raises(RuntimeError, match="no Module"):
        api.CheckpointState.load_checkpoint(path("checkpoint")).parameters["fc1.weight"].grad
    x, y = batch(0)
    model.train()
    model(x, y)
    g = state.parameters["fc1.weight"].grad
    w = state.parameters["fc1.weight"].data
    assert g.shape == w.shape and g.dtype == np.float32
    # central differences of the eval model's loss (the same loss, no training) in a few entries
    model.eval()
    eps = 1e-2
    for idx in [(0, 0), (1, 3), (w.shape[0] - 1, w.shape[1] - 1)]:
        losses = []
        for sign in (1, -1):
            moved = w.copy()
            moved[idx] += sign * eps
            state.parameters["fc1.weight"] = moved
            losses.append(float(np.asarray(model(x, y)[0]).ravel()[0]))
        state.parameters["fc1.weight"] = w
        fd = (losses[0] - losses[1]) / (2 * eps)
        assert abs(fd - g[idx]) <= 2e-3 + 1e-2 * abs(g[idx]), f"{idx}: finite difference {fd}, gradient {g[idx]}"
    # a second step without lazy_reset_grad adds the same gradient again
    model.train()
    model(x, y)
    np.testing.assert_allclose(state.parameters["fc1.weight"].grad, 2 * g, rtol=1e-6, atol=1e-9)


def test_contiguous_parameter_buffer_round_trip():
    state, model, optimizer = make()
    n = model.get_parameters_size(trainable_only=False)
    buf = model.get_contiguous_parameters(trainable_only=False)
    assert buf.shape == (n,) and buf.dtype == np.float32
    total = sum(state.parameters[k].data.size for k in state.parameters)
    assert n == total
    model.copy_buffer_to_parameters(np.zeros(model.get_parameters_size(True), dtype=np.float32))
    for k in state.parameters:
        if state.parameters[k].requires_grad:
            assert not state.parameters[k].data.any(), k


def test_non_contiguous_inputs_are_accepted():
    _, model, optimizer = make()
    x, y = batch(0)
    wide = np.zeros((8, 12), dtype=np.float32)
    wide[:, ::2] = x
    a = model(wide[:, ::2], y)
    _, model2, _ = make()
    b = model2(x, y)
    assert float(a[0]) == float(b[0])


def test_lossless_casts_are_made_and_give_the_same_step():
    x, y = batch(0)
    _, model, _ = make()
    a = model(x, y.astype(np.int32))  # labels declared int64: int32 widens without loss
    _, model2, _ = make()
    b = model2(x, y)
    assert float(a[0]) == float(b[0])
    _, model3, _ = make()
    c = model3(x.astype(np.float16), y)  # float16 -> float32 is exact
    _, model4, _ = make()
    d = model4(x.astype(np.float16).astype(np.float32), y)
    assert float(c[0]) == float(d[0])


def test_export_model_for_inferencing_embeds_the_trained_parameters():
    import onnx
    from onnx import numpy_helper
    state, model, optimizer = make()
    train(model, optimizer, 2)
    out = os.path.join(TMP, "inference.onnx")
    model.export_model_for_inferencing(out, ["logits"])
    exported = onnx.load(out)
    assert [i.name for i in exported.graph.input] == ["input"]
    assert [o.name for o in exported.graph.output] == ["logits"]
    weights = {t.name: numpy_helper.to_array(t) for t in exported.graph.initializer}
    for name in state.parameters:
        np.testing.assert_array_equal(weights[name], state.parameters[name].data, err_msg=name)


def test_linear_scheduler_follows_onnx_runtimes_curve():
    _, model, optimizer = make()
    scheduler = api.LinearLRScheduler(optimizer, warmup_step_count=2, total_step_count=6, initial_lr=0.1)
    rates = []
    for step in range(6):  # ONNX Runtime's sample loop: the rate follows the optimizer's step count
        model(*batch(step))
        optimizer.step()
        scheduler.step()
        model.lazy_reset_grad()
        rates.append(optimizer.get_learning_rate())
    # after n optimizer steps: n / warmup below the warmup, then (total - n) / (total - warmup), times 0.1
    want = [0.05, 0.1, 0.075, 0.05, 0.025, 0.0]
    assert rates == pytest.approx(want, rel=1e-6, abs=1e-9)
    optimizer.set_learning_rate(0.5)
    assert optimizer.get_learning_rate() == pytest.approx(0.5)


def torch_reference(name):
    """tests/data/torch/<name>/reference.txt (tools/make_torch_fixtures.py): named arrays and the losses."""
    out = {}
    with open(os.path.join(ROOT, "tests/data/torch", name, "reference.txt")) as f:
        for line in f:
            parts = line.split()
            if not parts or parts[0].startswith("#"):
                continue
            if parts[0] == "losses":
                out["losses"] = [float(v) for v in parts[2:]]
            else:
                shape = tuple(int(d) for d in parts[1].split(","))
                out[parts[0]] = np.array([float(v) for v in parts[2:]]).reshape(shape)
    return out


def test_generate_artifacts_gives_pytorchs_gradients():
    import onnx
    ref = torch_reference("mlp")
    folder = os.path.join(TMP, "generated")
    artifacts.generate_artifacts(onnx.load(os.path.join(ROOT, "tests/data/torch/mlp/forward.onnx")),
                                 loss=artifacts.LossType.CrossEntropyLoss, optimizer=artifacts.OptimType.AdamW,
                                 artifact_directory=folder)
    assert sorted(os.listdir(folder)) == ["checkpoint", "eval_model.onnx", "optimizer_model.onnx",
                                          "training_model.onnx"]
    state = api.CheckpointState.load_checkpoint(os.path.join(folder, "checkpoint"))
    model = api.Module(os.path.join(folder, "training_model.onnx"), state, os.path.join(folder, "eval_model.onnx"))
    api.Optimizer(os.path.join(folder, "optimizer_model.onnx"), model)
    out = model(ref["input"].astype(np.float32), ref["labels"].astype(np.int64))
    loss = float(np.asarray(out if not isinstance(out, list) else out[0]).ravel()[0])
    assert abs(loss - ref["losses"][0]) <= 1e-5 * abs(ref["losses"][0]), f"loss {loss} vs PyTorch {ref['losses'][0]}"
    checked = 0
    for key, want in ref.items():
        if not key.startswith("grad:"):
            continue
        got = state.parameters[key[5:]].grad
        scale = max(np.abs(want).max(), 1e-6)
        assert np.abs(got - want).max() / scale <= 1e-4, f"{key}: largest difference {np.abs(got - want).max()}"
        checked += 1
    assert checked == 4


def test_generate_artifacts_from_a_path_with_a_prefix_and_no_optimizer():
    folder = os.path.join(TMP, "prefixed")
    artifacts.generate_artifacts(os.path.join(ROOT, "tests/data/torch/mlp/forward.onnx"),
                                 loss=artifacts.LossType.CrossEntropyLoss, artifact_directory=folder, prefix="mlp_")
    assert sorted(os.listdir(folder)) == ["checkpoint", "mlp_eval_model.onnx", "mlp_training_model.onnx"]


def test_generate_artifacts_refuses_what_it_cannot_honour():
    model = os.path.join(ROOT, "tests/data/torch/mlp/forward.onnx")
    folder = os.path.join(TMP, "refused")
    CE = artifacts.LossType.CrossEntropyLoss
    with pytest.raises(ValueError, match="loss must be a LossType"):
        artifacts.generate_artifacts(model, artifact_directory=folder)
    with pytest.raises(ValueError, match="ort_format"):
        artifacts.generate_artifacts(model, loss=CE, artifact_directory=folder, ort_format=True)
    with pytest.raises(ValueError, match="nominal_checkpoint"):
        artifacts.generate_artifacts(model, loss=CE, artifact_directory=folder, nominal_checkpoint=True)
    with pytest.raises(ValueError, match="custom_op_library"):
        artifacts.generate_artifacts(model, loss=CE, artifact_directory=folder, custom_op_library="x.so")
    with pytest.raises(ValueError, match="does not support the argument"):
        artifacts.generate_artifacts(model, loss=CE, artifact_directory=folder, some_future_flag=1)
    with pytest.raises(RuntimeError, match="no_such.onnx"):
        artifacts.generate_artifacts(os.path.join(TMP, "no_such.onnx"), loss=CE, artifact_directory=folder)
    with pytest.raises(RuntimeError, match="nope"):
        artifacts.generate_artifacts(model, loss=CE, artifact_directory=folder, frozen_params=["nope"])
    assert not os.path.exists(os.path.join(folder, "training_model.onnx"))


def test_cosine_scheduler_follows_its_curve():
    _, model, optimizer = make()
    scheduler = api.CosineLRScheduler(optimizer, warmup_step_count=1, total_step_count=5, initial_lr=0.2,
                                      min_ratio=0.1)
    rates = []
    for step in range(5):
        model(*batch(step))
        optimizer.step()
        scheduler.step()
        model.lazy_reset_grad()
        rates.append(optimizer.get_learning_rate())
    # after n steps: p = (n - 1) / 4, factor = 0.1 + 0.9 * 0.5 * (1 + cos(pi p))
    want = [0.2 * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (n - 1) / 4))) for n in range(1, 6)]
    assert rates == pytest.approx(want, rel=1e-5, abs=1e-8)


def test_cuda_device_without_a_gpu_is_a_clear_error():
    state = api.CheckpointState.load_checkpoint(path("checkpoint"))
    try:
        api.Module(path("training_model.onnx"), state, device="cuda:0")
    except RuntimeError as e:
        assert "cuda" in str(e).lower(), str(e)
    else:
        pytest.skip("a CUDA device and provider library are present: the session was created")


def test_memory_limit_refuses_a_session_over_it_and_changes_nothing_under_it():
    state = api.CheckpointState.load_checkpoint(path("checkpoint"))
    with pytest.raises(MemoryError, match="memory limit of 64"):
        api.Module(path("training_model.onnx"), state, path("eval_model.onnx"), memory_limit_bytes=64)
    with pytest.raises(ValueError, match="memory_limit_bytes must be >= 0"):
        api.Module(path("training_model.onnx"), state, memory_limit_bytes=-1)
    losses = []
    for limit in (0, 16 << 20):
        state = api.CheckpointState.load_checkpoint(path("checkpoint"))
        model = api.Module(path("training_model.onnx"), state, path("eval_model.onnx"), memory_limit_bytes=limit)
        optimizer = api.Optimizer(path("optimizer_model.onnx"), model)
        losses.append(train(model, optimizer, 3))
    assert losses[0] == losses[1]


def test_device_options_reach_the_session_and_change_no_bit_on_the_simulated_device():
    # The simulated device runs the CPU's kernels (deterministic either way) and records steps as CUDA does:
    # every combination trains to the CPU's losses, bit for bit.
    losses = []
    for device, options in (("cpu", {}), ("sim", {}), ("sim", {"graph_capture": False}),
                            ("sim", {"deterministic": False})):
        state = api.CheckpointState.load_checkpoint(path("checkpoint"))
        model = api.Module(path("training_model.onnx"), state, path("eval_model.onnx"), device=device, **options)
        optimizer = api.Optimizer(path("optimizer_model.onnx"), model)
        losses.append(train(model, optimizer, 4))
    assert all(l == losses[0] for l in losses[1:]), losses


def test_an_optimizer_that_cannot_be_attached_leaves_the_module_working_on_its_device():
    # Attaching an optimizer makes a new session over the state (the old one released first: on a device it
    # holds the state). A failing attach raises and leaves a session without the optimizer, on the device.
    state = api.CheckpointState.load_checkpoint(path("checkpoint"))
    model = api.Module(path("training_model.onnx"), state, path("eval_model.onnx"), device="sim")
    with pytest.raises(RuntimeError, match="no_such_optimizer"):
        api.Optimizer(os.path.join(TMP, "no_such_optimizer.onnx"), model)
    before = float(model(*batch(0))[0])
    optimizer = api.Optimizer(path("optimizer_model.onnx"), model)
    model.lazy_reset_grad()
    losses = train(model, optimizer, 2)
    assert losses[0] == before
    assert losses[1] != before


def test_errors_carry_the_engines_message():
    with pytest.raises(RuntimeError, match="no_such_file"):
        api.CheckpointState.load_checkpoint(os.path.join(TMP, "no_such_file"))
    _, model, _ = make()
    with pytest.raises(ValueError, match="takes 2 inputs, got 1"):
        model(batch(0)[0])
    with pytest.raises(ValueError, match=r"input 'input' is declared float32\[.*got shape \[8,5\]"):
        model(np.zeros((8, 5), dtype=np.float32), batch(0)[1])
    with pytest.raises(ValueError, match="complex64 array cannot become float32"):
        model(np.zeros((8, 6), dtype=np.complex64), batch(0)[1])
    with pytest.raises(ValueError, match="float64 array cannot become float32"):
        model(np.zeros((8, 6)), batch(0)[1])
    with pytest.raises(ValueError, match="device"):
        api.Module(path("training_model.onnx"), api.CheckpointState.load_checkpoint(path("checkpoint")), device="")


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
