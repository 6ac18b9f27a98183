"""What runs an encoder's forward passes: the backends (`backends`: PyTorch, or the model
exported to OpenVINO by `openvino_export`, in int8 or float32), texts into padded token id
tensors and the device a module is on (`tokens`), the compute precision and the device a batch
goes to (`precision`), the padded batches under a token budget (`batching`), and the hook each
batch of a request's long work calls first, which shares the CPUs among concurrent requests
(`pacing`; the kernels call it too). It imports no other room of `models` but the errors."""
