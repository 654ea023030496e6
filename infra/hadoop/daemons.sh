# Sourced by infra/hadoop/hadoop.sh (one host) and infra/cluster/netns.sh (hosts in network namespaces): the
# Hadoop daemons both start, by their main classes.
main_class() {
    case "$1" in
        namenode) echo org.apache.hadoop.hdfs.server.namenode.NameNode ;;
        datanode) echo org.apache.hadoop.hdfs.server.datanode.DataNode ;;
        resourcemanager) echo org.apache.hadoop.yarn.server.resourcemanager.ResourceManager ;;
        nodemanager) echo org.apache.hadoop.yarn.server.nodemanager.NodeManager ;;
    esac
}

# The JVMs of these small clusters — the daemons, and the Spark containers (application master, executors) their
# clients start through CLOUDBURST_SPARK_CONTAINER_JAVA_OPTIONS (`env`): C1 only and the serial collector. Two
# cores host every JVM; C2's compiling and G1's threads took the CPU the work needed. Measured on the namespace
# cluster (2 hosts, 1 core each): an MNIST augment on YARN took 27-36 s and 35-46 CPU-seconds with Spark's
# defaults in its containers, 19-20 s and 23-25 with these. The same as training/jobs/spark_session.py's
# DRIVER_JAVA_OPTIONS (tests/test_cluster_settings.py checks that they agree).
SMALL_CLUSTER_JAVA_OPTS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
