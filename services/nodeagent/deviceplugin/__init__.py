"""Tessera's own node side: discovery, HAMi's node annotations and the kubelet's device-plugin
API (a DaemonSet in the chart, `nodeAgent.devicePlugin: tessera`)."""
