// Dumps Apache Kafka's broker, group and client-metrics ConfigDefs as JSON on stdout, for
// scripts/gen_broker_configs.py. Run with the reference jars on the class path:
//   java -cp '.cache/kafka-ref/lib/*' scripts/kafka_ref/DumpConfigDefs.java
// Only public API of the jars is used (ConfigDef keys, DynamicBrokerConfig's lists, GroupConfig).

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.coordinator.group.GroupConfig;
import org.apache.kafka.server.config.AbstractKafkaConfig;
import org.apache.kafka.server.config.DynamicBrokerConfig;
import org.apache.kafka.server.metrics.ClientMetricsConfigs;

public class DumpConfigDefs {
    static String q(String s) {
        if (s == null) return "null";
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) b.append(String.format("\\u%04x", (int) c)); else b.append(c);
            }
        }
        return b.append('"').toString();
    }

    static String list(List<String> items) {
        List<String> out = new ArrayList<>();
        for (String s : items) out.add(q(s));
        return "[" + String.join(", ", out) + "]";
    }

    static String keys(ConfigDef def, Map<String, String> modes, boolean brokerSynonyms,
                       Map<String, Optional<String>> groupSynonyms) {
        List<String> rows = new ArrayList<>();
        for (ConfigDef.ConfigKey k : def.configKeys().values()) {
            String dflt;
            boolean hasDefault = k.hasDefault();
            if (!hasDefault || k.defaultValue == null) dflt = null;
            else dflt = ConfigDef.convertToString(k.defaultValue, k.type);
            StringBuilder r = new StringBuilder("{");
            r.append("\"name\": ").append(q(k.name));
            r.append(", \"type\": ").append(q(k.type.name()));
            r.append(", \"has_default\": ").append(hasDefault);
            r.append(", \"default\": ").append(q(dflt));
            r.append(", \"importance\": ").append(q(k.importance == null ? null : k.importance.name()));
            r.append(", \"internal\": ").append(k.internalConfig);
            r.append(", \"validator\": ").append(q(k.validator == null ? null : k.validator.toString()));
            r.append(", \"doc\": ").append(q(k.documentation));
            if (modes != null) r.append(", \"mode\": ").append(q(modes.getOrDefault(k.name, "read-only")));
            if (brokerSynonyms) r.append(", \"synonyms\": ").append(list(DynamicBrokerConfig.brokerConfigSynonyms(k.name, true)));
            if (groupSynonyms != null) {
                Optional<String> s = groupSynonyms.getOrDefault(k.name, Optional.empty());
                r.append(", \"broker_synonym\": ").append(q(s.orElse(null)));
            }
            rows.add(r.append("}").toString());
        }
        return "[\n" + String.join(",\n", rows) + "\n]";
    }

    public static void main(String[] args) {
        Map<String, String> modes = DynamicBrokerConfig.dynamicConfigUpdateModes();
        System.out.println("{\"broker\": " + keys(AbstractKafkaConfig.CONFIG_DEF, modes, true, null) + ",");
        System.out.println("\"group\": " + keys(GroupConfig.CONFIG_DEF, null, false, GroupConfig.ALL_GROUP_CONFIG_SYNONYMS) + ",");
        System.out.println("\"client_metrics\": " + keys(ClientMetricsConfigs.configDef(), null, false, null) + ",");
        System.out.println("\"all_dynamic\": " + list(new ArrayList<>(new java.util.TreeSet<>(DynamicBrokerConfig.ALL_DYNAMIC_CONFIGS))) + ",");
        System.out.println("\"dynamic_security\": " + list(new ArrayList<>(new java.util.TreeSet<>(DynamicBrokerConfig.DYNAMIC_SECURITY_CONFIGS))) + ",");
        System.out.println("\"dynamic_broker_names\": " + list(new ArrayList<>(new java.util.TreeSet<>(org.apache.kafka.server.config.DynamicConfig.Broker.names()))));
        System.out.println("}");
    }
}
