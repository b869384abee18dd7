// The stream-table join of bench/streams_bench.py, written with Kafka Streams: a stream of
// orders keyed by customer id joined (inner) with the customers table on the key; each order
// is written with its customer's value appended ("order|customer").
// Arguments: bootstrap application.id processing.guarantee orders-topic output-topic state.dir
// customers-topic. Runs until the process is terminated.
import java.util.Properties;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

public final class StreamTableJoin {
    public static void main(String[] args) throws InterruptedException {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[2]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[5]);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        // The same commit interval for every framework in the bench.
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 1000);

        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> customers = builder.table(args[6], Consumed.with(Serdes.String(), Serdes.String()),
                                                         Materialized.as("customers"));
        builder.stream(args[3], Consumed.with(Serdes.String(), Serdes.String()))
            .join(customers, (order, customer) -> order + "|" + customer)
            .to(args[4], Produced.with(Serdes.String(), Serdes.String()));

        WindowedCount.run(builder, props);
    }
}
