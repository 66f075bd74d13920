// Regression inputs for scripts/fuzz.py (cases split as in the lit tests).
// A function that returns its argument: bufferization clones it, and the
// CPU pipelines must lower the clone too.
func.func @return_argument(%a: tensor<16x64xf32>) -> tensor<16x64xf32> {
  return %a : tensor<16x64xf32>
}
