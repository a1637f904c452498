package dev.beeweave;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.connectors.BoltConnectorInternalSettings;
import org.neo4j.configuration.connectors.HttpConnector;
import org.neo4j.configuration.connectors.HttpsConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.graphdb.QueryExecutionException;
import org.neo4j.io.ByteUnit;

/**
 * Test-only launcher: an embedded Neo4j community DBMS that serves Bolt on 127.0.0.1.
 *
 * <pre>
 * java -cp 'target/classes:target/lib/*' dev.beeweave.Neo4jLauncher PORT HOME_DIR
 * </pre>
 *
 * HOME_DIR is the DBMS home (data/ and logs/ go below it). Authentication is off unless
 * the environment variable PASSWORD_ENV is set: then it is on, and the user {@code neo4j}
 * has that password (any other is refused; no lock-out after failed attempts, so a test
 * of a wrong password cannot lock out the next one). The page cache is 256 MiB, HTTP is
 * off. Once the default database is available the launcher prints a line starting with
 * READY_MARKER; SIGTERM (or Ctrl-C) shuts the DBMS down cleanly.
 */
public final class Neo4jLauncher {
    public static final String READY_MARKER = "BEEWEAVE_NEO4J_READY";
    /** The environment variable holding the {@code neo4j} user's password (unset: auth off). */
    public static final String PASSWORD_ENV = "NEO4J_TEST_AUTH";

    private Neo4jLauncher() {}

    public static void main(String[] args) {
        if (args.length != 2) {
            System.err.println("usage: Neo4jLauncher <port> <homeDir>");
            System.exit(2);
        }
        final int port;
        try {
            port = Integer.parseInt(args[0]);
        } catch (NumberFormatException e) {
            System.err.println("invalid port: " + args[0]);
            System.exit(2);
            return;
        }
        Path home = Path.of(args[1]).toAbsolutePath();
        String password = System.getenv(PASSWORD_ENV);
        boolean auth = password != null && !password.isEmpty();

        SocketAddress bolt = new SocketAddress("127.0.0.1", port);
        long t0 = System.nanoTime();
        final DatabaseManagementService dbms;
        try {
            dbms = new DatabaseManagementServiceBuilder(home)
                    .setConfig(GraphDatabaseSettings.auth_enabled, auth)
                    .setConfig(GraphDatabaseSettings.auth_minimum_password_length, 1)
                    .setConfig(GraphDatabaseSettings.auth_max_failed_attempts, 0)
                    .setConfig(BoltConnector.enabled, true)
                    .setConfig(BoltConnector.listen_address, bolt)
                    .setConfig(BoltConnector.advertised_address, bolt)
                    .setConfig(HttpConnector.enabled, false)
                    .setConfig(HttpsConnector.enabled, false)
                    .setConfig(GraphDatabaseSettings.pagecache_memory, ByteUnit.mebiBytes(256))
                    .setConfig(GraphDatabaseSettings.preallocate_logical_logs, false)
                    // Benchmarks write millions of events: keep the transaction logs bounded
                    // (the default keeps two days of them, which filled a disk).
                    .setConfig(GraphDatabaseSettings.keep_logical_logs, "256M size")
                    .setConfig(GraphDatabaseSettings.udc_enabled, false)
                    // A test server: don't linger ~10 s in Bolt's graceful shutdown.
                    .setConfig(BoltConnectorInternalSettings.connection_shutdown_wait_time, Duration.ofSeconds(1))
                    .setConfig(BoltConnectorInternalSettings.thread_pool_shutdown_wait_time, Duration.ofSeconds(1))
                    .build();
        } catch (Throwable t) {
            System.err.println("Neo4j failed to start:");
            t.printStackTrace();
            System.exit(1);
            return;
        }

        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            System.out.println("Shutting down Neo4j ...");
            try {
                dbms.shutdown();
                System.out.println("Neo4j stopped.");
            } catch (Throwable t) {
                t.printStackTrace();
            } finally {
                stopped.countDown();
            }
        }, "neo4j-shutdown"));

        if (auth) {
            try {
                setPassword(dbms, password);
            } catch (Throwable t) {
                System.err.println("could not set the neo4j user's password:");
                t.printStackTrace();
                System.exit(1);  // the shutdown hook stops the DBMS
            }
        }
        GraphDatabaseService db = dbms.database(GraphDatabaseSettings.DEFAULT_DATABASE_NAME);
        while (!db.isAvailable(5_000)) {
            System.out.println("waiting for database '" + db.databaseName() + "' ...");
        }
        long ms = (System.nanoTime() - t0) / 1_000_000;
        System.out.println(READY_MARKER + " bolt://" + bolt + " home=" + home + " auth=" + auth
                + " startup_ms=" + ms);
        System.out.flush();

        try {
            stopped.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * Gives the {@code neo4j} user {@code password}, usable at once (no forced change).
     * Neo4j refuses to set the password the user already has (a kept home, or "neo4j"
     * itself); then only the forced change is lifted.
     */
    private static void setPassword(DatabaseManagementService dbms, String password) {
        GraphDatabaseService system = dbms.database(GraphDatabaseSettings.SYSTEM_DATABASE_NAME);
        try {
            system.executeTransactionally(
                    "ALTER USER neo4j SET PLAINTEXT PASSWORD $password CHANGE NOT REQUIRED",
                    Map.of("password", password));
        } catch (QueryExecutionException e) {
            if (!String.valueOf(e.getMessage()).contains("cannot be the same")) {
                throw e;
            }
            system.executeTransactionally("ALTER USER neo4j SET PASSWORD CHANGE NOT REQUIRED");
        }
    }
}
