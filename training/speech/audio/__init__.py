"""Audio front end for the speech workloads: clips in, time–frequency feature maps out."""
