// Times ONNX Runtime on one benchmark workload, for `//tools:bench -- --compare-ort`
// (tools/bench_workloads.py): the forward model in ONNX Runtime's native CPU inference (onnxruntime-node,
// `threads` intra-op threads, all graph optimizations), and the training artifacts in ONNX Runtime's own
// training engine (onnxruntime-web 1.19.2, wasm, one thread: TrainStep + OptimizerStep + LazyResetGrad).
// Inputs as `ontrain bench` makes them: floats uniform in [-1, 1) from a fixed seed, integer labels 0.
// Prints one JSON object: {"forward_ms", "train_steps_per_s", "train_error"}; medians after warm-up.
// Usage: node bench_ort.js FORWARD.onnx ARTIFACT_DIR THREADS STEPS SHAPE KIND [forward-only]
//   SHAPE: the first input's, comma-separated, batch first; KIND: float, or int64 for token ids (zeros);
//   forward-only: the inference timing alone (the harness's repeated rounds)
'use strict';
const fs = require('fs');
const path = require('path');

function median(v) {
  const s = v.slice().sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

function input(ort, dims, kind) {
  if (kind === 'int64') return new ort.Tensor('int64', new BigInt64Array(dims.reduce((a, b) => a * b, 1)), dims);
  return floats(ort, dims, 1);
}

function floats(ort, dims, seed) {
  const n = dims.reduce((a, b) => a * b, 1);
  const v = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; ++i) {  // xorshift32: any fixed sequence will do
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    v[i] = (s / 4294967296) * 2 - 1;
  }
  return new ort.Tensor('float32', v, dims);
}

async function forwardMs(file, shape, kind, threads, steps) {
  const ort = require(path.join(__dirname, 'node_modules/onnxruntime-node'));
  const session = await ort.InferenceSession.create(file, {
    intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all'});
  const feeds = {[session.inputNames[0]]: input(ort, shape, kind)};
  const times = [];
  for (let i = 0; i < 20 + steps; ++i) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    const t1 = process.hrtime.bigint();
    if (i >= 20) times.push(Number(t1 - t0) / 1e6);
  }
  return median(times);
}

async function trainStepsPerS(dir, shape, kind, steps) {
  const ort = require(path.join(__dirname, 'node_modules/onnxruntime-web/dist/ort.training.wasm.min.js'));
  ort.env.wasm.numThreads = 1;
  ort.env.logLevel = 'error';
  const read = (f) => new Uint8Array(fs.readFileSync(path.join(dir, f)));
  const session = await ort.TrainingSession.create({
    checkpointState: read('checkpoint'), trainModel: read('training_model.onnx'),
    evalModel: read('eval_model.onnx'), optimizerModel: read('optimizer_model.onnx')});
  const feeds = {};
  for (const name of session.trainingInputNames) {
    if (Object.keys(feeds).length === 0) feeds[name] = input(ort, shape, kind);
    else feeds[name] = new ort.Tensor('int64', new BigInt64Array(shape[0]), [shape[0]]);
  }
  const times = [];
  for (let i = 0; i < 5 + steps; ++i) {
    const t0 = process.hrtime.bigint();
    await session.runTrainStep(feeds);
    await session.runOptimizerStep();
    await session.lazyResetGrad();
    const t1 = process.hrtime.bigint();
    if (i >= 5) times.push(Number(t1 - t0) / 1e6);
  }
  await session.release();
  return 1000 / median(times);
}

async function main() {
  const [file, dir, threads, steps, shapeText, kind, only] = process.argv.slice(2);
  const shape = shapeText.split(',').map(Number);
  const out = {forward_ms: await forwardMs(file, shape, kind, Number(threads), Number(steps))};
  if (only === 'forward-only') {
    console.log(JSON.stringify(out));
    return;
  }
  try {
    out.train_steps_per_s = await trainStepsPerS(dir, shape, kind, Math.max(20, Math.floor(Number(steps) / 4)));
  } catch (e) {
    out.train_error = String(e.message || e).split('\n')[0];
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => { console.error(e); process.exit(1); });
