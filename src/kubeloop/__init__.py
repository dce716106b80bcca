"""kubeloop: a controller-runtime-grade asyncio runtime for Kubernetes operators."""

__version__ = "0.1.0"
