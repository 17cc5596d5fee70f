#!/usr/bin/python3
"""PyTorch reference fixtures for ontrain's autodiff (tests/graph/torch_parity_test.cc).

For each small model: the forward ONNX model as PyTorch exports it (opset 14: LayerNorm decomposed,
GELU through Erf; opset 17 for torch.nn.TransformerEncoderLayer), the fixed batch, the gradients of the mean cross-entropy loss at initialisation and the
losses of 10 torch.optim.AdamW steps, the eval-mode logits at initialisation and after the 10 steps, and
BatchNorm's running statistics after them (lr 1e-2, betas 0.9/0.999, eps 1e-8, weight decay 0.01: ONNX
Runtime's adam_mode 0) on that batch. Run with Debian's /usr/bin/python3 (python3-torch 1.13) from the
repository root (naming fixtures remakes only those); the tests only read tests/data/torch/.
"""
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = "tests/data/torch"
STEPS, LR = 10, 1e-2


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 16)
        self.fc2 = nn.Linear(16, 5)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 6, 3, padding=1)
        self.fc = nn.Linear(24, 5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(torch.flatten(x, 1))


class Block(nn.Module):
    """A pre-LayerNorm transformer encoder block and a classifier on the mean over the sequence."""

    def __init__(self, d=8, ff=16):
        super().__init__()
        g = torch.Generator().manual_seed(3)
        p = lambda *s: nn.Parameter(torch.randn(*s, generator=g) * 0.3)
        self.ln1 = nn.LayerNorm(d)
        self.ln2 = nn.LayerNorm(d)
        self.wq, self.wk, self.wv, self.wo = p(d, d), p(d, d), p(d, d), p(d, d)
        self.w1, self.b1, self.w2, self.b2 = p(d, ff), p(ff), p(ff, d), p(d)
        self.wc = p(d, 5)
        self.d = d
        with torch.no_grad():  # distinct values: the exporter merges equal initializers into one
            for ln in (self.ln1, self.ln2):
                ln.weight.copy_(1 + 0.2 * torch.randn(d, generator=g))
                ln.bias.copy_(0.1 * torch.randn(d, generator=g))

    def forward(self, x):
        h = self.ln1(x)
        q, k, v = h @ self.wq, h @ self.wk, h @ self.wv
        att = torch.softmax(q @ k.transpose(1, 2) / self.d ** 0.5, dim=-1)
        x = x + (att @ v) @ self.wo
        h = self.ln2(x)
        x = x + F.gelu(h @ self.w1 + self.b1) @ self.w2 + self.b2
        return x.mean(dim=1) @ self.wc


class BnDropout(nn.Module):
    def __init__(self):
        super().__init__()
        # No bias before BatchNorm: its gradient is zero in exact arithmetic, so Adam would move it by
        # normalised rounding noise, differently in each engine, and the running mean tracks it.
        self.conv = nn.Conv2d(3, 4, 3, bias=False)
        self.bn = nn.BatchNorm2d(4)
        self.drop = nn.Dropout(p=0.0)  # masks cannot be shared across engines: ratio 0 for the parity run
        self.fc = nn.Linear(4, 5)

    def forward(self, x):
        x = self.drop(F.relu(self.bn(self.conv(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class EncoderLayer(nn.Module):
    """torch.nn.TransformerEncoderLayer as PyTorch exports it at opset 17: nn.MultiheadAttention with computed
    Slice bounds and Reshape shapes, native LayerNormalization, dropout 0."""

    def __init__(self):
        super().__init__()
        self.enc = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        return self.fc(self.enc(x).mean(dim=1))


class PadPool(nn.Module):
    """F.pad in reflect and replicate modes (PyTorch exports the pads as a computed tensor) and max_pool1d
    after it, so the pooled input's dims are known only at run time."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(2, 4, 3)
        self.fc = nn.Linear(4 * 9, 5)

    def forward(self, x):
        h = F.elu(self.conv(F.pad(x, (2, 1), mode="reflect")))
        h = F.max_pool1d(F.pad(h, (1, 1), mode="replicate"), 2)
        return self.fc(torch.flatten(h, 1))


class UNet(nn.Module):
    """A small U-Net exported with symbolic batch, height and width: BatchNorm, MaxPool, ConvTranspose and a
    skip Concat whose shapes are known only at run time; per-pixel classes (labels [N, H, W])."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 4, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(4)
        self.c2 = nn.Conv2d(4, 8, 3, padding=1)
        self.up = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
        self.out = nn.Conv2d(8, 5, 1)

    def forward(self, x):
        a = F.relu(self.bn(self.c1(x)))
        u = self.up(F.relu(self.c2(F.max_pool2d(a, 2))))
        return self.out(torch.cat([a, u], 1))


class UNetInterp(nn.Module):
    """A U-Net that upsamples with F.interpolate, nearest in one branch and bilinear (align_corners=False)
    in the other: ONNX Resize with scales, its gradient ONNX Runtime's ResizeGrad."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 4, 3, padding=1)
        self.c2 = nn.Conv2d(4, 6, 3, padding=1)
        self.c3 = nn.Conv2d(6, 3, 1)
        self.out = nn.Conv2d(4 + 6 + 3, 5, 1)

    def forward(self, x):
        a = F.relu(self.c1(x))
        b = F.relu(self.c2(F.max_pool2d(a, 2)))
        up_nearest = F.interpolate(b, scale_factor=2.0, mode="nearest")
        up_bilinear = F.interpolate(self.c3(b), scale_factor=2.0, mode="bilinear", align_corners=False)
        return self.out(torch.cat([a, up_nearest, up_bilinear], 1))


class CausalAttention(nn.Module):
    """Single-head causal self-attention whose mask is a float buffer (-inf above the diagonal), which the
    exporter writes as an initializer: it must stay a constant, as PyTorch never trains it."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(8, 24)
        self.proj = nn.Linear(8, 5)
        self.register_buffer("mask", torch.triu(torch.full((6, 6), float("-inf")), 1))

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, -1)
        att = q @ k.transpose(1, 2) / (8 ** 0.5) + self.mask
        return self.proj((att.softmax(-1) @ v).mean(1))


class LstmClassifier(nn.Module):
    """A bidirectional LSTM (batch first) whose outputs are averaged over time and classified, plus a second
    one-directional LSTM layer read through its final hidden state: ONNX LSTM, its weights reordered from
    PyTorch's gate order by exported graph ops, trained through LSTMTraining / LSTMGrad."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 8, batch_first=True, bidirectional=True)
        self.lstm2 = nn.LSTM(16, 7, batch_first=True)
        self.fc = nn.Linear(16 + 7, 5)

    def forward(self, x):
        y, _ = self.lstm(x)
        _, (h, _) = self.lstm2(y)
        return self.fc(torch.cat([y.mean(1), h[0]], 1))


class GruSequence(nn.Module):
    """A two-layer GRU (batch first; PyTorch exports linear_before_reset=1) whose every step is classified and
    averaged, plus a bidirectional GRU read through its final hidden states."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(6, 7, num_layers=2, batch_first=True)
        self.bi = nn.GRU(6, 4, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(7 + 8, 5)

    def forward(self, x):
        y, _ = self.gru(x)
        _, h = self.bi(x)
        return self.fc(torch.cat([y.mean(1), h[0], h[1]], 1))


class RnnClassifier(nn.Module):
    """A bidirectional Elman RNN with ReLU (batch first) feeding a tanh one; the last step is classified."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(6, 5, batch_first=True, bidirectional=True, nonlinearity="relu")
        self.rnn2 = nn.RNN(10, 6, batch_first=True)
        self.fc = nn.Linear(6, 5)

    def forward(self, x):
        y, _ = self.rnn(x)
        y2, _ = self.rnn2(y)
        return self.fc(y2[:, -1])


class EinsumAttention(nn.Module):
    """Multi-head self-attention written with torch.einsum (scores, weighted values and the output
    projection), mean-pooled and classified."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(8, 24)
        self.out = nn.Parameter(torch.randn(2, 4, 8) * 0.3)  # heads, head dim, model dim
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        n, t, _ = x.shape
        q, k, v = self.qkv(x).reshape(n, t, 3, 2, 4).unbind(2)
        att = torch.einsum("nqhd,nkhd->nhqk", q, k) / 2.0
        h = torch.einsum("nhqk,nkhd->nqhd", att.softmax(-1), v)
        return self.fc(torch.einsum("nqhd,hdm->nqm", h, self.out).mean(1))


class DenseNetBlock(nn.Module):
    """DenseNet in small (torchvision's layout): a stem convolution, two dense blocks of two layers each
    (BatchNorm, ReLU, 1x1 convolution, BatchNorm, ReLU, 3x3 convolution, its output concatenated to the
    layer's input) with a transition between them (BatchNorm, ReLU, 1x1 convolution, AvgPool2d(2), which the
    exporter writes as Pad plus AveragePool), a final BatchNorm and ReLU, global average pooling and a
    classifier. Trained with the batch statistics."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1, bias=False)

        def layer(c):
            return nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, 8, 1, bias=False), nn.BatchNorm2d(8),
                                 nn.ReLU(), nn.Conv2d(8, 4, 3, padding=1, bias=False))

        self.block1 = nn.ModuleList([layer(8), layer(12)])
        self.transition = nn.Sequential(nn.BatchNorm2d(16), nn.ReLU(), nn.Conv2d(16, 8, 1, bias=False),
                                        nn.AvgPool2d(2, 2))
        self.block2 = nn.ModuleList([layer(8), layer(12)])
        self.norm = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        x = self.stem(x)
        for layer in self.block1:
            x = torch.cat([x, layer(x)], 1)
        x = self.transition(x)
        for layer in self.block2:
            x = torch.cat([x, layer(x)], 1)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(F.relu(self.norm(x)), 1), 1))


# name, model, input shape, export mode, opset
MODELS = [
    ("mlp", Mlp, (8, 12), torch.onnx.TrainingMode.EVAL, 14),
    ("cnn", Cnn, (4, 1, 10, 10), torch.onnx.TrainingMode.EVAL, 14),
    ("transformer", Block, (4, 6, 8), torch.onnx.TrainingMode.EVAL, 14),
    ("bn_dropout", BnDropout, (8, 3, 6, 6), torch.onnx.TrainingMode.TRAINING, 14),
    ("encoder_layer", EncoderLayer, (4, 6, 16), torch.onnx.TrainingMode.TRAINING, 17),
    ("pad_pool", PadPool, (4, 2, 16), torch.onnx.TrainingMode.EVAL, 17),
    ("unet", UNet, (2, 1, 8, 8), torch.onnx.TrainingMode.TRAINING, 17),
    ("unet_interp", UNetInterp, (2, 1, 8, 8), torch.onnx.TrainingMode.EVAL, 17),
    ("causal_mask", CausalAttention, (4, 6, 8), torch.onnx.TrainingMode.EVAL, 17),
    ("lstm", LstmClassifier, (4, 5, 6), torch.onnx.TrainingMode.EVAL, 17),
    ("gru", GruSequence, (4, 5, 6), torch.onnx.TrainingMode.EVAL, 17),
    ("rnn", RnnClassifier, (4, 5, 6), torch.onnx.TrainingMode.EVAL, 17),
    ("einsum_attention", EinsumAttention, (4, 6, 8), torch.onnx.TrainingMode.EVAL, 17),
    ("densenet", DenseNetBlock, (4, 3, 8, 8), torch.onnx.TrainingMode.TRAINING, 17),
]
SPATIAL_AXES = {"unet": {2: "height", 3: "width"}, "unet_interp": {2: "height", 3: "width"}}  # symbolic beyond the batch


def write_tensor(f, name, t):
    a = t.detach().numpy().astype(np.float64).ravel()
    f.write("%s %s %s\n" % (name, ",".join(str(d) for d in t.shape), " ".join("%.17g" % v for v in a)))


def main(only):
    for name, cls, shape, mode, opset in MODELS:
        if only and name not in only:
            continue
        torch.manual_seed(0)
        model = cls()
        gen = torch.Generator().manual_seed(1)
        x = torch.randn(*shape, generator=gen)
        per_pixel = name in SPATIAL_AXES
        labels = torch.randint(0, 5, (shape[0],) + (tuple(shape[2:]) if per_pixel else ()), generator=gen)
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        model.train(mode == torch.onnx.TrainingMode.TRAINING)
        torch.onnx.export(model, x, os.path.join(d, "forward.onnx"), input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "batch", **SPATIAL_AXES.get(name, {})},
                                        "logits": {0: "batch", **SPATIAL_AXES.get(name, {})}}, opset_version=opset,
                          do_constant_folding=False, training=mode)
        model.eval()
        with torch.no_grad():
            eval_logits = model(x)  # inference mode: Dropout off, BatchNorm on its running statistics
        model.train()
        params = dict(model.named_parameters())
        opt = torch.optim.AdamW(params.values(), lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
        losses = []
        with open(os.path.join(d, "reference.txt"), "w") as f:
            f.write("# PyTorch %s reference (tools/make_torch_fixtures.py): 'batch' tensors, gradients of the mean "
                    "cross-entropy at initialisation ('grad <param>'), and 'loss' of 10 AdamW steps\n" % torch.__version__)
            write_tensor(f, "input", x)
            write_tensor(f, "labels", labels.double())
            write_tensor(f, "eval_logits", eval_logits)
            for step in range(STEPS):
                opt.zero_grad()
                loss = F.cross_entropy(model(x), labels)
                loss.backward()
                if step == 0:
                    for pname, p in params.items():
                        write_tensor(f, "grad:" + pname, p.grad)
                losses.append(loss.item())
                opt.step()
            f.write("losses - %s\n" % " ".join("%.17g" % l for l in losses))
            # After the 10 steps: BatchNorm's running statistics (updated by each training forward, with
            # the unbiased batch variance) and the eval-mode logits of the trained model.
            for bname, b in model.named_buffers():
                if "running" in bname:
                    write_tensor(f, "running:" + bname, b)
            model.eval()
            with torch.no_grad():
                write_tensor(f, "trained_eval_logits", model(x))
        print(name, ["%.5f" % l for l in losses])


if __name__ == "__main__":
    import sys
    main(sys.argv[1:])  # fixture names to (re)make; all when none
