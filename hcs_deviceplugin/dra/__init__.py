"""The DRA front end: this node's DRA pools as a ResourceSlice, and the kubelet DRA plugin that
prepares the devices the scheduler allocated to ResourceClaims (vendor-neutral; see README "DRA")."""
