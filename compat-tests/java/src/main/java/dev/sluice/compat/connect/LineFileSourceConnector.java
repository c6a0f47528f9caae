package dev.sluice.compat.connect;

import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.source.SourceConnector;

/**
 * Copies the lines of a file into a topic, one record per line (the value,
 * a string; no key), with one task. It does what Kafka's
 * FileStreamSourceConnector does, for the Connect test: the connect-file
 * artifact of the Kafka release under test cannot be fetched by these
 * builds, and the previous release's does not link against its clients.
 *
 * The task's source offset is {"position": bytes read} under the source
 * partition {"filename": file}, as FileStreamSource's, so that the worker
 * stores it in its offsets topic and a restarted task resumes after the
 * last line whose offset was committed.
 *
 * Config: file (the path to read), topic (where to write).
 */
public final class LineFileSourceConnector extends SourceConnector {
    static final String FILE = "file";
    static final String TOPIC = "topic";

    static final ConfigDef CONFIG = new ConfigDef()
            .define(FILE, ConfigDef.Type.STRING, ConfigDef.NO_DEFAULT_VALUE, new ConfigDef.NonEmptyString(),
                    ConfigDef.Importance.HIGH, "The file to read, line by line.")
            .define(TOPIC, ConfigDef.Type.STRING, ConfigDef.NO_DEFAULT_VALUE, new ConfigDef.NonEmptyString(),
                    ConfigDef.Importance.HIGH, "The topic to write a record per line to.");

    private Map<String, String> props;

    @Override
    public String version() {
        return "1";
    }

    @Override
    public void start(Map<String, String> props) {
        CONFIG.parse(props); // rejects a config without file or topic
        this.props = Map.copyOf(props);
    }

    @Override
    public Class<? extends Task> taskClass() {
        return LineFileSourceTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        return List.of(props); // one file, one task
    }

    @Override
    public void stop() {
    }

    @Override
    public ConfigDef config() {
        return CONFIG;
    }
}
