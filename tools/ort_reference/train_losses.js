// Trains ONNX Runtime artifact sets in ONNX Runtime's own training engine (onnxruntime-web 1.19.2, wasm,
// under node) on the synthetic batches of sets.json and prints one line per step: "<set> <step> <loss>",
// then the eval model's loss on the next batch: "<set> eval <loss>".
// Usage: node train_losses.js ARTIFACT_ROOT  (each set in ARTIFACT_ROOT/<name>/)
'use strict';
const fs = require('fs');
const path = require('path');

const ort = require(path.join(__dirname, 'node_modules/onnxruntime-web/dist/ort.training.wasm.min.js'));
ort.env.wasm.numThreads = 1;
ort.env.logLevel = 'error';

function synthetic(kind, dims, step, classes) {
  const n = dims.reduce((a, b) => a * b, 1);
  if (kind === 'float' || kind === 'target') {
    const v = new Float32Array(n);
    for (let i = 0; i < n; ++i) {
      v[i] = kind === 'float' ? Math.sin(0.37 * i + 1.3 * step) * 0.8 : Math.cos(0.11 * i + 0.7 * step) * 0.5;
    }
    return new ort.Tensor('float32', v, dims);
  }
  if (kind === 'int32') {
    const v = new Int32Array(n);
    for (let i = 0; i < n; ++i) v[i] = (7 * i + 3 * step) % classes;
    return new ort.Tensor('int32', v, dims);
  }
  const v = new BigInt64Array(n);
  for (let i = 0; i < n; ++i) v[i] = BigInt((7 * i + 3 * step) % classes);
  return new ort.Tensor('int64', v, dims);
}

async function trainSet(root, set, steps) {
  const dir = path.join(root, set.name);
  const read = (f) => new Uint8Array(fs.readFileSync(path.join(dir, f)));
  const session = await ort.TrainingSession.create({
    checkpointState: read('checkpoint'),
    trainModel: read('training_model.onnx'),
    evalModel: read('eval_model.onnx'),
    optimizerModel: read('optimizer_model.onnx'),
  });
  for (let step = 0; step < steps; ++step) {
    const feeds = {};
    for (const [name, kind, dims, classes] of set.inputs) feeds[name] = synthetic(kind, dims, step, classes);
    const out = await session.runTrainStep(feeds);
    const loss = out[session.trainingOutputNames[0]].data[0];
    await session.runOptimizerStep();
    await session.lazyResetGrad();
    console.log(`${set.name} ${step} ${loss.toPrecision(9)}`);
  }
  // The eval model after training, on the next batch: it sees the trained parameters and any state the
  // training steps updated in place (BatchNormalization running statistics).
  const feeds = {};
  for (const [name, kind, dims, classes] of set.inputs) feeds[name] = synthetic(kind, dims, steps, classes);
  const evalOut = await session.runEvalStep(feeds);
  console.log(`${set.name} eval ${evalOut[session.evalOutputNames[0]].data[0].toPrecision(9)}`);
  await session.release();
}

async function main() {
  const root = process.argv[2];
  const spec = JSON.parse(fs.readFileSync(path.join(__dirname, 'sets.json')));
  for (const set of spec.sets) await trainSet(root, set, spec.steps);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
