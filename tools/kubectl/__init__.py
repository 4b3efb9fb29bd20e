"""kubectl: Kubernetes clusters from the kubeconfig (contexts are accounts)."""
