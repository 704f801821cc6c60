package config

// ClusterRequests configures the maintenances asked from the cluster
// (MaintenanceRequests: kustodian-ctl request NODE).
type ClusterRequests struct {
	// Enabled: the agent keeps running (stay), so that it takes a request
	// made while its node is Idle. Whenever it runs, it takes them anyway.
	Enabled bool
}
