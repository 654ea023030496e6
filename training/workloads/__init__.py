"""The workloads: one package per workload, each exporting ``DEFINITION`` (a
``training.workload_definition.WorkloadDefinition``) and holding its own code. The registry that finds them is
``training.workload_registry``; which packages are workloads is ``training.workload_packages``."""
