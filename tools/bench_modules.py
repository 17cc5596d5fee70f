"""The reference workloads of the provider benchmark as PyTorch modules: the CPU harness
(tools/bench_workloads.py) and the GPU one (tools/gpu/bench_models.py) export and time these.

Workloads (the issue's four, then three architectures as people build them):
  mlp_small    MLP 784-128-10 (ReLU), batch 64
  mlp_large    MLP 784-512-512-10, batch 128
  cnn          Conv 1->32 3x3, ReLU, MaxPool 2, Conv 32->64 3x3, ReLU, MaxPool 2, Flatten, Linear ->128,
               ReLU, Linear ->10 on 1x28x28, batch 64
  transformer  one pre-LayerNorm encoder block (seq 64, d_model 128, 4 heads, FFN 512, GELU), mean-pool,
               Linear ->10, batch 16
  resnet       a CIFAR-style ResNet: 3x3 stem (16), three stages of two BasicBlocks (16, 32, 64 channels,
               stride-2 1x1 shortcuts), BatchNorm, global average pool, Linear ->10 on 3x32x32, batch 32
  mobilenet    a MobileNetV2-style net: stride-2 stem (32), inverted residual blocks (expand 1x1, depthwise
               3x3, project 1x1, ReLU6, BatchNorm, residual where shapes allow), 1x1 to 256, global average
               pool, Linear ->10 on 3x32x32, batch 32
  gpt          a GPT-style decoder: token and position embeddings (vocabulary 256, 64 positions, d 128), two
               pre-LayerNorm causal self-attention blocks (4 heads, FFN 512, GELU), final LayerNorm, the next
               token's logits from the last position, batch 16
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MlpSmall(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(784, 128), nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class MlpLarge(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(784, 512), nn.Linear(512, 512), nn.Linear(512, 10)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 32, 3), nn.Conv2d(32, 64, 3)
        self.fc1, self.fc2 = nn.Linear(64 * 5 * 5, 128), nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


def self_attention(qkv, proj, x, heads, future=None):
    """Multi-head self-attention of x [b, t, d] through the fused q/k/v projection `qkv` and the output
    projection `proj`; `future` (a bool [t, t] mask) hides later positions."""
    b, t, d = x.shape
    q, k, v = (z.reshape(b, t, heads, d // heads).transpose(1, 2) for z in qkv(x).split(d, dim=2))
    att = q @ k.transpose(2, 3) / (d // heads) ** 0.5
    if future is not None:
        att = att.masked_fill(future, float("-inf"))
    return proj((torch.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, t, d))


class Transformer(nn.Module):
    def __init__(self, d=128, heads=4, ff=512):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.head = nn.Linear(d, 10)
        self.heads = heads

    def forward(self, x):
        x = x + self_attention(self.qkv, self.proj, self.ln1(x), self.heads)
        x = x + self.ff2(F.gelu(self.ff1(self.ln2(x))))
        return self.head(x.mean(dim=1))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        return F.relu(y + (x if self.short is None else self.short(x)))


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem, self.bn = nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16)
        blocks, cin = [], 16
        for cout, stride in [(16, 1), (32, 2), (64, 2)]:
            blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = self.blocks(F.relu(self.bn(self.stem(x))))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand=4):
        super().__init__()
        mid = cin * expand
        self.body = nn.Sequential(
            nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU6(),
            nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False), nn.BatchNorm2d(mid), nn.ReLU6(),
            nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class MobileNet(nn.Module):
    def __init__(self):
        super().__init__()
        layers = [nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6()]
        cin = 32
        for cout, stride in [(16, 1), (24, 2), (24, 1), (32, 2), (32, 1), (64, 1), (64, 1)]:
            layers.append(InvertedResidual(cin, cout, stride))
            cin = cout
        layers += [nn.Conv2d(cin, 256, 1, bias=False), nn.BatchNorm2d(256), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(256, 10)

    def forward(self, x):
        return self.fc(F.adaptive_avg_pool2d(self.features(x), 1).flatten(1))


class DecoderBlock(nn.Module):
    def __init__(self, t, d, heads, ff):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.heads, self.t = heads, t

    def forward(self, x):
        pos = torch.arange(self.t, device=x.device)
        future = pos.unsqueeze(0) > pos.unsqueeze(1)  # computed in the graph: no mask parameter to freeze
        x = x + self_attention(self.qkv, self.proj, self.ln1(x), self.heads, future)
        return x + self.ff2(F.gelu(self.ff1(self.ln2(x))))


class Gpt(nn.Module):
    def __init__(self, vocab=256, t=64, d=128, heads=4, ff=512, layers=2):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(t, d) * 0.02)
        self.blocks = nn.Sequential(*[DecoderBlock(t, d, heads, ff) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.blocks(self.tok(idx) + self.pos)
        return self.head(self.ln(x)[:, -1])


# name, module, input shape (an int64 input: token ids, below the vocabulary)
WORKLOADS = [("mlp_small", MlpSmall, (64, 784)), ("mlp_large", MlpLarge, (128, 784)), ("cnn", Cnn, (64, 1, 28, 28)),
             ("transformer", Transformer, (16, 64, 128)), ("resnet", ResNet, (32, 3, 32, 32)),
             ("mobilenet", MobileNet, (32, 3, 32, 32)), ("gpt", Gpt, (16, 64))]
TOKENS = {"gpt"}  # workloads whose input is token ids
ISSUE_WORKLOADS = ("mlp_small", "mlp_large", "cnn", "transformer")  # 2x PyTorch; the rest: ahead of it


def example_input(name, shape):
    return torch.zeros(*shape, dtype=torch.long) if name in TOKENS else torch.rand(*shape) * 2 - 1
