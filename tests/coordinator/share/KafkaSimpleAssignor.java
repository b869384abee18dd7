// Runs Kafka 4.3.1's share-group SimpleAssignor (kafka-group-coordinator jar) over the cases
// test_assignor_reference.py writes on stdin, carrying each case's target assignment from step
// to step as Kafka's coordinator does, and prints every member's target per step.
//
// stdin:  CASE <name> | TOPIC <msb> <lsb> <partitions> | STEP <member>=<topic index>,... ...
// stdout: <case> <step> <member> <topic index>:<partition>.<partition>|...   (sorted)

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.apache.kafka.coordinator.group.assignor.SimpleAssignor;
import org.apache.kafka.coordinator.group.modern.Assignment;
import org.apache.kafka.coordinator.group.modern.GroupSpecImpl;
import org.apache.kafka.coordinator.group.modern.MemberSubscriptionAndAssignmentImpl;

public class KafkaSimpleAssignor {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        SimpleAssignor assignor = new SimpleAssignor();
        String name = "";
        List<Uuid> topics = new ArrayList<>();
        Map<Uuid, Integer> counts = new HashMap<>();
        Map<String, Map<Uuid, Set<Integer>>> target = new HashMap<>();
        int step = 0;
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split(" ");
            if (f[0].equals("CASE")) {
                name = f[1];
                topics.clear();
                counts.clear();
                target.clear();
                step = 0;
            } else if (f[0].equals("TOPIC")) {
                Uuid id = new Uuid(Long.parseLong(f[1]), Long.parseLong(f[2]));
                topics.add(id);
                counts.put(id, Integer.parseInt(f[3]));
            } else if (f[0].equals("STEP")) {
                // TargetAssignmentBuilder: the members go into a new HashMap<>() in the group's order;
                // a member's target comes back from its record as a HashMap of HashSets.
                Map<String, MemberSubscriptionAndAssignmentImpl> members = new HashMap<>();
                Set<Set<Uuid>> distinct = new HashSet<>();
                for (int i = 1; i < f.length; i++) {
                    String[] kv = f[i].split("=", -1);
                    Set<Uuid> subs = new HashSet<>();
                    if (!kv[1].isEmpty())
                        for (String t : kv[1].split(","))
                            subs.add(topics.get(Integer.parseInt(t)));
                    distinct.add(subs);
                    Map<Uuid, Set<Integer>> current = new HashMap<>();
                    target.getOrDefault(kv[0], Map.of()).forEach((t, ps) -> current.put(t, new HashSet<>(ps)));
                    members.put(kv[0], new MemberSubscriptionAndAssignmentImpl(
                        Optional.empty(), Optional.empty(), subs, new Assignment(current)));
                }
                SubscriptionType type = distinct.size() <= 1 ? SubscriptionType.HOMOGENEOUS : SubscriptionType.HETEROGENEOUS;
                SubscribedTopicDescriber describer = new SubscribedTopicDescriber() {
                    public int numPartitions(Uuid topicId) {
                        return counts.getOrDefault(topicId, -1);
                    }
                    public Set<String> racksForPartition(Uuid topicId, int partition) {
                        return Set.of();
                    }
                };
                GroupAssignment result = assignor.assign(
                    new GroupSpecImpl(members, type, new HashMap<>(), Optional.empty()), describer);
                target.clear();
                for (String member : new TreeSet<>(members.keySet())) {
                    MemberAssignment a = result.members().get(member);
                    Map<Uuid, Set<Integer>> parts = a == null ? Map.of() : a.partitions();
                    target.put(member, parts);
                    TreeMap<Integer, TreeSet<Integer>> sorted = new TreeMap<>();
                    parts.forEach((t, ps) -> {
                        if (!ps.isEmpty())
                            sorted.put(topics.indexOf(t), new TreeSet<>(ps));
                    });
                    StringBuilder s = new StringBuilder();
                    sorted.forEach((t, ps) -> {
                        if (s.length() > 0)
                            s.append('|');
                        s.append(t).append(':');
                        StringBuilder p = new StringBuilder();
                        for (int x : ps)
                            p.append(p.length() > 0 ? "." : "").append(x);
                        s.append(p);
                    });
                    out.append(name).append(' ').append(step).append(' ').append(member).append(' ').append(s).append('\n');
                }
                step++;
            }
        }
        System.out.print(out);
    }
}
