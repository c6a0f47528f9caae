package dev.sluice.compat.connect;

import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.sink.SinkConnector;

/**
 * Appends the values of the records of its topics to a file, one line per
 * record, with one task: what Kafka's FileStreamSinkConnector does (see
 * {@link LineFileSourceConnector} for why it is here). Lines reach the file
 * when the worker flushes the task, just before it commits the consumer
 * offsets, so a committed offset never covers a line not yet written.
 *
 * Config: file (the path to append to), topics (Connect's own).
 */
public final class LineFileSinkConnector extends SinkConnector {
    static final String FILE = "file";

    static final ConfigDef CONFIG = new ConfigDef()
            .define(FILE, ConfigDef.Type.STRING, ConfigDef.NO_DEFAULT_VALUE, new ConfigDef.NonEmptyString(),
                    ConfigDef.Importance.HIGH, "The file to append a line per record to.");

    private Map<String, String> props;

    @Override
    public String version() {
        return "1";
    }

    @Override
    public void start(Map<String, String> props) {
        CONFIG.parse(props);
        this.props = Map.copyOf(props);
    }

    @Override
    public Class<? extends Task> taskClass() {
        return LineFileSinkTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        return List.of(props);
    }

    @Override
    public void stop() {
    }

    @Override
    public ConfigDef config() {
        return CONFIG;
    }
}
