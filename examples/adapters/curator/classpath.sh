# The jars the Curator adapter compiles and runs against: Debian's (libcurator-recipes-java
# and what it depends on). Sourced by build.sh and run.sh.
j=/usr/share/java
CURATOR_CLASSPATH="$j/curator-recipes.jar:$j/curator-framework.jar:$j/curator-client.jar:$j/zookeeper.jar:$j/zookeeper-jute.jar:$j/guava.jar:$j/slf4j-api.jar:$j/slf4j-jdk14.jar"
