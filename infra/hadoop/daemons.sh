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
