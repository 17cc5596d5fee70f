// Runs an ONNX model in ONNX Runtime's native CPU engine (onnxruntime-node) on the synthetic input of
// tests/ort_artifacts.h (float input [8,6], step given) and prints the first output, one value per line.
// Usage: node run_inference.js MODEL INPUT_NAME STEP
'use strict';
const path = require('path');
const ort = require(path.join(__dirname, 'node_modules/onnxruntime-node'));

async function main() {
  const [model, inputName, step] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model);
  const data = new Float32Array(8 * 6);
  for (let i = 0; i < data.length; ++i) data[i] = Math.sin(0.37 * i + 1.3 * Number(step)) * 0.8;
  const out = await session.run({[inputName]: new ort.Tensor('float32', data, [8, 6])});
  for (const v of out[session.outputNames[0]].data) console.log(v.toPrecision(9));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
