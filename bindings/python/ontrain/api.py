"""ONNX Runtime's Python training API (onnxruntime.training.api) over ontrain's engine.

A script written for ONNX Runtime runs with its import changed to `from ontrain.api import ...`:
CheckpointState, Module, Optimizer and LinearLRScheduler keep ONNX Runtime's names, arguments and return
types, with numpy arrays where ONNX Runtime returns numpy arrays or OrtValues. ontrain's other schedules
are CosineLRScheduler, StepLRScheduler, ExponentialLRScheduler and ConstantLRScheduler.

Not yet here: ONNX Runtime's nominal checkpoints through this API, ontrain.artifacts.
"""
import os
import weakref

import numpy as np

from . import _ontrain

__all__ = [
    "CheckpointState", "Module", "Optimizer", "LinearLRScheduler", "CosineLRScheduler", "StepLRScheduler",
    "ExponentialLRScheduler", "ConstantLRScheduler", "Parameter",
]


class Parameter:
    """One checkpoint parameter: `data` is a numpy copy; assigning `data` writes the checkpoint; `grad` is a
    copy of its gradient buffer in the Module that trains the state (None for a frozen parameter)."""

    def __init__(self, owner, name):
        self._owner = owner  # the CheckpointState
        self._state = owner._state
        self.name = name

    @property
    def data(self):
        return self._state.get_parameter(self.name)

    @data.setter
    def data(self, value):
        self._state.set_parameter(self.name, np.asarray(value))

    @property
    def requires_grad(self):
        return self._state.requires_grad(self.name)

    @property
    def grad(self):
        module = self._owner._module() if self._owner._module is not None else None
        if module is None:
            raise RuntimeError(f"parameter {self.name!r}: no Module trains this CheckpointState, so there is no "
                               "gradient buffer (gradients live in the Module's session)")
        return module._session.gradient(self.name)

    def __repr__(self):
        return f"Parameter(name={self.name!r}, requires_grad={self.requires_grad})"


class Parameters:
    """`state.parameters[name]` (a Parameter), `name in`, iteration over names, assignment of arrays."""

    def __init__(self, owner):
        self._owner = owner
        self._state = owner._state

    def __getitem__(self, name):
        if name not in self:
            raise KeyError(f"no parameter named {name!r} in the checkpoint")
        return Parameter(self._owner, name)

    def __setitem__(self, name, value):
        self[name].data = value

    def __contains__(self, name):
        return name in self._state.parameter_names()

    def __iter__(self):
        return iter(self._state.parameter_names())

    def __len__(self):
        return len(self._state.parameter_names())


class Properties:
    """`state.properties[name]` for int, float and str properties; `name in`; `del`."""

    def __init__(self, state):
        self._state = state

    def __getitem__(self, name):
        return self._state.get_property(name)

    def __setitem__(self, name, value):
        self._state.set_property(name, value)

    def __delitem__(self, name):
        if name not in self:
            raise KeyError(f"no property named {name!r} in the checkpoint")
        self._state.remove_property(name)

    def __contains__(self, name):
        return self._state.has_property(name)

    def __iter__(self):
        return iter(self._state.property_names())

    def __len__(self):
        return len(self._state.property_names())


class CheckpointState:
    """Parameters, optimizer state and properties (ONNX Runtime's checkpoint format)."""

    def __init__(self, native):
        self._state = native
        self._module = None  # weak reference to the latest Module over this state (for Parameter.grad)
        self.parameters = Parameters(self)
        self.properties = Properties(native)

    @classmethod
    def load_checkpoint(cls, checkpoint_uri):
        return cls(_ontrain.CheckpointState.load(os.fspath(checkpoint_uri)))

    @classmethod
    def save_checkpoint(cls, state, checkpoint_uri, include_optimizer_state=False):
        state._state.save(os.fspath(checkpoint_uri), bool(include_optimizer_state))


def _providers(device):
    """"cpu", "cuda", "cuda:1" or a provider list ("sim,cpu") -> the engine's comma-separated list."""
    if not isinstance(device, str) or not device:
        raise ValueError(f"device must be a non-empty string such as 'cpu' or 'cuda:0', got {device!r}")
    return device if device == "cpu" or "," in device else device + ",cpu"


class Module:
    """The training and eval models bound to a checkpoint state."""

    def __init__(self, train_model_uri, state, eval_model_uri=None, device="cpu", *, memory_limit_bytes=0,
                 graph_capture=True, deterministic=True):
        """ontrain's own options:
        memory_limit_bytes caps the memory the session plans (parameters, gradients, optimizer moments, every
        graph's intermediate values); 0 is no cap. Going over it raises before anything is allocated, naming
        the graph and the value.
        graph_capture: a device (cuda) records a step once its shapes have been seen and replays it as one
        launch; False launches every kernel at every step. The results are the same.
        deterministic: a device keeps to fixed algorithms, so two runs give the same bits; False lets it use
        nondeterministic ones and time cuDNN's convolution algorithms at the first step of each shape (as
        PyTorch's cudnn.benchmark). The CPU is deterministic either way."""
        self._memory_limit = int(memory_limit_bytes)
        self._graph_capture = bool(graph_capture)
        self._deterministic = bool(deterministic)
        self._train_model = os.fspath(train_model_uri)
        self._eval_model = os.fspath(eval_model_uri) if eval_model_uri is not None else ""
        self._optimizer_model = ""
        self._providers = _providers(device)
        self._state = state
        self.training = True
        self._session = self._create()
        state._module = weakref.ref(self)

    def _create(self):
        return _ontrain.TrainingSession(self._state._state, self._train_model, self._eval_model,
                                        self._optimizer_model, self._providers, 0, self._memory_limit,
                                        self._graph_capture, self._deterministic)

    def _attach_optimizer(self, optimizer_uri):
        # The engine binds the optimizer model when a session is created: a new session over the same state.
        # Gradients accumulated since the last lazy_reset_grad are not carried over. The old session is
        # released first: on a device it holds the state, which goes back to the host when it ends (the
        # engine refuses a second session over a state another one holds). Should the new one fail, the
        # module keeps a session without the optimizer, and the error is raised.
        previous = self._optimizer_model
        self._optimizer_model = os.fspath(optimizer_uri)
        self._session = None
        try:
            self._session = self._create()
        except Exception:
            self._optimizer_model = previous
            self._session = self._create()
            raise

    def __call__(self, *user_inputs):
        outputs = (self._session.train_step(list(user_inputs)) if self.training
                   else self._session.eval_step(list(user_inputs)))
        return outputs[0] if len(outputs) == 1 else outputs

    def train(self, mode=True):
        self.training = bool(mode)
        return self

    def eval(self):
        return self.train(False)

    def lazy_reset_grad(self):
        self._session.lazy_reset_grad()

    def get_contiguous_parameters(self, trainable_only=False):
        return self._session.copy_parameters_to_buffer(bool(trainable_only))

    def get_parameters_size(self, trainable_only=True):
        return self._session.get_parameters_size(bool(trainable_only))

    def copy_buffer_to_parameters(self, buffer, trainable_only=True):
        self._session.copy_buffer_to_parameters(np.asarray(buffer), bool(trainable_only))

    def export_model_for_inferencing(self, inference_model_uri="inference_model.onnx",
                                     graph_output_names=("output",)):
        self._session.export_model_for_inferencing(os.fspath(inference_model_uri), list(graph_output_names))

    def input_names(self):
        return self._session.train_input_names() if self.training else self._session.eval_input_names()

    def output_names(self):
        return self._session.train_output_names() if self.training else self._session.eval_output_names()


class Optimizer:
    """The optimizer model, updating the module's parameters from their gradients."""

    def __init__(self, optimizer_uri, module):
        self._module = module
        module._attach_optimizer(optimizer_uri)

    def step(self):
        self._module._session.optimizer_step()

    def set_learning_rate(self, learning_rate):
        self._module._session.set_learning_rate(float(learning_rate))

    def get_learning_rate(self):
        return self._module._session.get_learning_rate()


class _Scheduler:
    def __init__(self, optimizer, kind, warmup_step_count, total_step_count, initial_lr, **extra):
        self._session = optimizer._module._session
        self._session.register_scheduler(kind, int(warmup_step_count), int(total_step_count), float(initial_lr),
                                         **extra)

    def step(self):
        self._session.scheduler_step()


class LinearLRScheduler(_Scheduler):
    """ONNX Runtime's linear warmup then linear decay to 0 at total_step_count."""

    def __init__(self, optimizer, warmup_step_count, total_step_count, initial_lr):
        super().__init__(optimizer, "linear", warmup_step_count, total_step_count, initial_lr)


class CosineLRScheduler(_Scheduler):
    """Linear warmup, then a cosine from initial_lr down to min_ratio * initial_lr at total_step_count."""

    def __init__(self, optimizer, warmup_step_count, total_step_count, initial_lr, min_ratio=0.0):
        super().__init__(optimizer, "cosine", warmup_step_count, total_step_count, initial_lr, min_ratio=min_ratio)


class StepLRScheduler(_Scheduler):
    """Linear warmup, then initial_lr * gamma ** ((step - warmup) // step_size)."""

    def __init__(self, optimizer, warmup_step_count, step_size, initial_lr, gamma=0.1):
        super().__init__(optimizer, "step", warmup_step_count, 0, initial_lr, step_size=step_size, gamma=gamma)


class ExponentialLRScheduler(_Scheduler):
    """Linear warmup, then initial_lr * gamma ** (step - warmup)."""

    def __init__(self, optimizer, warmup_step_count, initial_lr, gamma=0.1):
        super().__init__(optimizer, "exponential", warmup_step_count, 0, initial_lr, gamma=gamma)


class ConstantLRScheduler(_Scheduler):
    """Linear warmup, then initial_lr."""

    def __init__(self, optimizer, warmup_step_count, initial_lr):
        super().__init__(optimizer, "constant", warmup_step_count, 0, initial_lr)
